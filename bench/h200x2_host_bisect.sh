#!/usr/bin/env bash
# Issue 20 on the 2xH200 box, ~3-5 min (run it with timeout 600): host bisect names the GPU made slow by a competing compute load.
# Four emulated hosts, two per GPU: gpuhostA0 and gpuhostA1 on GPU 0, gpuhostB0 and gpuhostB1 on GPU 1, reached
# by the box's real mpirun through a plm_rsh_agent that gives each its own hostname (unshare --uts, as the CPU
# namespace test bed does) and its own CUDA_VISIBLE_DEVICES. Four, not two: with one host per GPU a slow pair
# cannot tell which of its two GPUs is slow (a one-rank run has no bus bandwidth to judge); with two per GPU
# the pair of hosts on the same good GPU passes and becomes the known-good anchor. NCCL sees four hosts (their
# hostnames differ): NET transport over sockets (NCCL_IB_DISABLE=1), no P2P/NVLink between the emulated hosts.
# Steps:
#   1. calibrate, no load: a host bisect without floors (its pairs span the two GPUs, then all four run together)
#      and a 2x1 sweep on A0+A1 (one GPU); floors per grid (2x1, 4x1) = 0.5x the lowest busbw measured (a sweep
#      grid must fit the driver's 2 GPUs, so 4x1 is measured through the bisect's own round);
#   2. control: `envmatrix bisect --hosts` against that floor, no load (want exit 0, `exclude: ` empty);
#   3. loaded: the same with a bf16 matmul loop on GPU 1 for the whole command (a separate process, started and
#      killed here) (want exit 1, `exclude: gpuhostB0,gpuhostB1`: the two hosts of GPU 1, those of GPU 0 ok; as the
#      planner runs on a simulated cluster with that fault: 4 rounds, 10 runs: the pairs A0+B1 and A1+B0 slow,
#      each host alone (no 1x1 floor: ok), A0+B0 and A1+B1 slow, A0+A1 ok and B0+B1 slow).
# The box exports OMPI_MCA_plm=isolated (mpirun may start ranks on this node only: every other --host is "already
# filled"); the confs pass --mca plm rsh so the agent starts each emulated host's daemon.
# Every process, the load included, has NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1.
# Outputs: console.log and a tarball of the run directories in $OUT.
# Run from the repo root: bash bench/h200x2_host_bisect.sh
# CPU rehearsal (gloo, no GPU, no load: checks the agent, configs, calibration and parsing; needs root, unshare,
# mpirun): REHEARSAL=1 OUT=/tmp/x bash bench/h200x2_host_bisect.sh
# One-GPU rehearsal on real NCCL (all four hosts on GPU 0, no load: checks that NCCL runs two emulated hosts on
# one GPU through the box's mpirun and agent): ONE_GPU=1 bash bench/h200x2_host_bisect.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ "${REHEARSAL:-0}" = 1 ]; then
  BACKEND=gloo SIZE=1M ITERS=3 WARMUP=1 PY=${PY:-python3}
  export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-$PWD}
else
  BACKEND=nccl SIZE=32M ITERS=10 WARMUP=3 PY=python3
  source bench/box_env.sh
fi
W="$OUT/h200x2_host_bisect"
mkdir -p "$W"
BURN_PID=
cleanup() { [ -n "$BURN_PID" ] && kill "$BURN_PID" 2>/dev/null; wait 2>/dev/null; }
# The ranks resolve MASTER_ADDR (the first host's name): /etc/hosts gets the four names for the run only.
cp /etc/hosts "$OUT/etc_hosts.orig"
trap 'cleanup; cat "$OUT/etc_hosts.orig" > /etc/hosts; rm -f "$OUT/etc_hosts.orig"' EXIT

# The agent: ssh semantics (HOST CMD...), the command run under the host's own hostname and GPU.
cat > "$W/agent.sh" <<'SH'
#!/bin/sh
host=$1; shift
case "$host" in
  gpuhostA0|gpuhostA1) gpu=0 ;;
  gpuhostB0|gpuhostB1) gpu=__GPU_B__ ;;
  *) echo "h200x2 agent: unknown host $host" >&2; exit 255 ;;
esac
export CUDA_VISIBLE_DEVICES=$gpu NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
exec unshare --uts sh -c "hostname $host; $*"
SH
sed -i "s/__GPU_B__/$([ "${ONE_GPU:-0}" = 1 ] && echo 0 || echo 1)/" "$W/agent.sh"
chmod +x "$W/agent.sh"
HOSTS="gpuhostA0 gpuhostA1 gpuhostB0 gpuhostB1"
i=10; for h in $HOSTS; do echo "127.0.1.$i $h" >> /etc/hosts; i=$((i + 1)); done
printf '%s slots=1\n' $HOSTS > "$W/hosts.txt"

conf() {  # conf FILE HOSTS GRID [EXPECT_JSON]
  "$PY" - "$1" "$BACKEND" "$SIZE" "$ITERS" "$WARMUP" "$W/agent.sh" "$2" "$3" "${4:-null}" <<'PY'
import json, sys
path, backend, size, iters, warmup, agent, hosts, grid, expect = sys.argv[1:]
setup = {"NCCL_IB_DISABLE": "1"} if backend == "nccl" else {}
conf = {"name": "h200x2_host_bisect", "backend": backend, "launcher": "mpirun", "hosts": hosts.split(","),
        "launcher_opts": {"mpirun": {"extra_args": ["--mca", "plm", "rsh", "--mca", "plm_rsh_agent", agent]}}, "setups": {"base": setup},
        "grids": [grid],
        "probe": {"timeout_s": 120, "bench": {"collectives": ["allreduce"], "min_bytes": size, "max_bytes": size,
                                              "iters": int(iters), "warmup": int(warmup)}}}
if json.loads(expect):
    conf["expect"] = json.loads(expect)
open(path, "w").write(json.dumps(conf, indent=1))  # JSON is YAML: no yaml module needed on the box
PY
}

{
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi (rehearsal)"
  mpirun --version | head -1
  echo "== 1. calibrate, no load: bisect --hosts without floors (pairs across the GPUs 2x1, then all four 4x1) and a"
  echo "   2x1 sweep on A0+A1 (one GPU); the floors are 0.5x the lowest busbw measured per grid"
  conf "$W/plain.yaml" "${HOSTS// /,}" 2x1
  conf "$W/cal_one.yaml" gpuhostA0,gpuhostA1 2x1
  time "$PY" -m envmatrix bisect --hosts "$W/hosts.txt" conf="$W/plain.yaml" --grid 1x1 --out "$W/cal_hosts"; echo "exit $?"
  time "$PY" -m envmatrix sweep conf="$W/cal_one.yaml" --out "$W/cal_one"; echo "exit $?"
  EXPECT=$("$PY" - "$SIZE" "$W/cal_hosts" "$W/cal_one" <<'PY'
import json, sys
from envmatrix.bench.sizes import parse_size
from envmatrix.reporting.html_model import load_results
from envmatrix.reporting.thresholds import measured_points
size, got = parse_size(sys.argv[1]), {}
import os
for run_dir in (d for d in sys.argv[2:] if os.path.isdir(d)):  # the 2x1 sweep is refused on a one-GPU box
    for r in load_results(run_dir, "calibration"):
        got.setdefault(r.grid, []).extend(v for (c, s, m), v in measured_points(r).items()
                                          if (c, s, m) == ("allreduce", size, "busbw_gbps"))
print(f"calibrated allreduce {sys.argv[1]} busbw GB/s per grid: {got}", file=sys.stderr)
print(json.dumps({grid: {"allreduce": {sys.argv[1]: {"busbw_gbps": round(0.5 * min(v), 6)}}} for grid, v in got.items() if v}))
PY
  )
  echo "thresholds: $EXPECT"
  conf "$W/expect.yaml" "${HOSTS// /,}" 2x1 "$EXPECT"
  echo "== 2. control: bisect --hosts, no load (want exit 0, exclude: empty)"
  time "$PY" -m envmatrix bisect --hosts "$W/hosts.txt" conf="$W/expect.yaml" --grid 1x1 --out "$W/control"; echo "exit $?"
  echo "== 3. loaded: a matmul loop on GPU 1 (gpuhostB0, gpuhostB1) for the whole bisect (want exit 1, exclude: gpuhostB0,gpuhostB1)"
  if [ "${REHEARSAL:-0}" = 1 ] || [ "${ONE_GPU:-0}" = 1 ]; then
    echo "(rehearsal: no GPU load; want exit 0 again)"
  else
    CUDA_VISIBLE_DEVICES=1 "$PY" - > "$W/burn.log" 2>&1 <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
n, t0 = 0, time.time()
print("burn started", torch.cuda.get_device_name(0), flush=True)
while True:
    for _ in range(50):
        a @ b
    torch.cuda.synchronize()
    n += 50
    if time.time() - t0 > 10:
        print(f"{n / (time.time() - t0):.0f} matmuls/s", flush=True)
        n, t0 = 0, time.time()
PY
    BURN_PID=$!
    for _ in $(seq 60); do grep -q "burn started" "$W/burn.log" && break; sleep 1; done
    cat "$W/burn.log"
    nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader
  fi
  time "$PY" -m envmatrix bisect --hosts "$W/hosts.txt" conf="$W/expect.yaml" --grid 1x1 --out "$W/loaded"; echo "exit $?"
  cleanup; BURN_PID=
  cat "$W/burn.log" 2>/dev/null | tail -n 3
  echo "== summary"
  "$PY" - "$W" <<'PY'
import json, sys
for step in ("control", "loaded"):
    r = json.load(open(f"{sys.argv[1]}/{step}/host_bisect.json"))
    print(step, "exclude:", ",".join(r["exclude"]), "rounds", r["rounds"], "runs", r["runs"], "complete", r["complete"])
    for h, v in r["verdicts"].items():
        print("   ", h, v["status"], v["why"])
    for e in r["evidence"]:
        print("    round", e["round"], ",".join(e["hosts"]), e["verdict"], e["run"])
PY
} > "$W/console.log" 2>&1
cp "$W/console.log" "$OUT/console.log"
tar -C "$OUT" -czf "$OUT/h200x2_host_bisect.tar.gz" h200x2_host_bisect && rm -rf "$W"
tail -n 60 "$OUT/console.log"
