#!/usr/bin/env bash
# Issue 20 on the 2xH200 box, ~2 min (run it with timeout 400): host bisect names the GPU made slow by a competing compute load.
# Two emulated hosts, one per GPU: gpuhostA on GPU 0, gpuhostB on GPU 1, reached by the box's real mpirun through a
# plm_rsh_agent that gives each its own hostname (unshare --uts, as the CPU namespace test bed does) and its own
# CUDA_VISIBLE_DEVICES. NCCL sees two hosts (their hostnames differ): NET transport over sockets (NCCL_IB_DISABLE=1).
# Why this shape (earlier records on this box, benchmarks/host_bisect_costs.md): four hosts, two per GPU, cannot work:
# two ranks of one GPU in two processes time-slice that GPU, so a same-GPU pair is 25x slower than a cross-GPU
# pair with no load at all and no per-grid floor fits both. With one host per GPU the pair says "slow" and the
# host bisect's next round runs each host alone (1x1): a one-rank allreduce has no bus bandwidth, but its time
# does show a GPU shared with a compute load (each operation waits for the GPU's time slice), so 1x1 gets a time
# ceiling and 2x1 a busbw floor.
# Steps:
#   1. calibrate, no load: a host bisect without thresholds (its one pair, 2x1) and a 1x1 sweep on each host;
#      2x1 floor = 0.7x the lowest busbw, 1x1 ceiling = 3x the highest time (the loaded pair measured 0.4x);
#   2. control: `envmatrix bisect --hosts` against those, no load (want exit 0, `exclude: ` empty);
#   3. loaded: the same with a bf16 matmul loop on GPU 1 for the whole command (a separate process, started and
#      killed here) (want exit 1, `exclude: gpuhostB`; as the planner runs with that fault: 2 rounds, 3 runs: the
#      pair slow, then gpuhostA alone ok and gpuhostB alone slow).
# mpirun binds each rank to one core by default with 2 ranks; NCCL's proxy and socket threads then share it (36 ms
# per 256 KiB allreduce between two emulated hosts): the confs pass --bind-to none, as a real host's many cores allow.
# The box exports OMPI_MCA_plm=isolated (mpirun may start ranks on this node only: every other --host is "already
# filled"); the confs pass --mca plm rsh so the agent starts each emulated host's daemon.
# Every process, the load included, has NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1.
# Outputs: console.log and a tarball of the run directories in $OUT.
# Run from the repo root: bash benchmarks/h200x2_host_bisect.sh     (SIZE/ITERS/WARMUP/FLOOR/CEILING from the environment)
# CPU rehearsal (gloo, no GPU, no load: checks the agent, configs, calibration and parsing; needs root, unshare,
# mpirun): REHEARSAL=1 OUT=/tmp/x bash benchmarks/h200x2_host_bisect.sh
# One-GPU rehearsal on real NCCL (both hosts on GPU 0, no load): ONE_GPU=1 bash benchmarks/h200x2_host_bisect.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ "${REHEARSAL:-0}" = 1 ]; then
  BACKEND=gloo SIZE=1M ITERS=3 WARMUP=1 PY=${PY:-python3}
  export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-$PWD}
else
  # 256K, not 32M: a small collective waits a whole time slice of the GPU the load shares
  BACKEND=nccl SIZE=${SIZE:-256K} ITERS=${ITERS:-30} WARMUP=${WARMUP:-5} PY=python3
  source benchmarks/box_env.sh
fi
FLOOR=${FLOOR:-0.7} CEILING=${CEILING:-3}
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
  gpuhostA) gpu=0 ;;
  gpuhostB) gpu=__GPU_B__ ;;
  *) echo "h200x2 agent: unknown host $host" >&2; exit 255 ;;
esac
export CUDA_VISIBLE_DEVICES=$gpu NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
exec unshare --uts sh -c "hostname $host; $*"
SH
sed -i "s/__GPU_B__/$([ "${ONE_GPU:-0}" = 1 ] && echo 0 || echo 1)/" "$W/agent.sh"
chmod +x "$W/agent.sh"
HOSTS="gpuhostA gpuhostB"
i=10; for h in $HOSTS; do echo "127.0.1.$i $h" >> /etc/hosts; i=$((i + 1)); done
printf '%s slots=1\n' $HOSTS > "$W/hosts.txt"

conf() {  # conf FILE HOSTS GRID [EXPECT_JSON]
  "$PY" - "$1" "$BACKEND" "$SIZE" "$ITERS" "$WARMUP" "$W/agent.sh" "$2" "$3" "${4:-null}" <<'PY'
import json, sys
path, backend, size, iters, warmup, agent, hosts, grid, expect = sys.argv[1:]
setup = {"NCCL_IB_DISABLE": "1"} if backend == "nccl" else {}
conf = {"name": "h200x2_host_bisect", "backend": backend, "launcher": "mpirun", "hosts": hosts.split(","),
        "launcher_opts": {"mpirun": {"extra_args": ["--mca", "plm", "rsh", "--mca", "plm_rsh_agent", agent,
                                                  "--bind-to", "none"]}}, "setups": {"base": setup},
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
  echo "== 1. calibrate, no load: bisect --hosts without thresholds (the pair, 2x1) and a 1x1 sweep on each host;"
  echo "   2x1 floor = ${FLOOR}x the lowest busbw, 1x1 ceiling = ${CEILING}x the highest time"
  conf "$W/plain.yaml" "${HOSTS// /,}" 2x1
  time "$PY" -m envmatrix bisect --hosts "$W/hosts.txt" conf="$W/plain.yaml" --grid 1x1 --out "$W/cal_pair"; echo "exit $?"
  for h in $HOSTS; do
    conf "$W/cal_$h.yaml" "$h" 1x1
    time "$PY" -m envmatrix sweep conf="$W/cal_$h.yaml" --out "$W/cal_$h"; echo "exit $?"
  done
  EXPECT=$("$PY" - "$SIZE" "$FLOOR" "$CEILING" "$W/cal_pair" "$W"/cal_gpuhost* <<'PY'
import json, os, sys
from envmatrix.bench.sizes import parse_size
from envmatrix.app.report import load_results
from envmatrix.judgement.thresholds import measured_points
size_text, floor, ceiling = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
size, got = parse_size(size_text), {}
for run_dir in (d for d in sys.argv[4:] if os.path.isdir(d)):
    for r in load_results(run_dir, "calibration"):
        for (c, s, m), v in measured_points(r).items():
            if (c, s) == ("allreduce", size) and m == ("busbw_gbps" if r.grid != "1x1" else "time_us"):
                got.setdefault((r.grid, m), []).append(v)
print(f"calibrated allreduce {size_text} per grid: {got}", file=sys.stderr)
expect = {}
for (grid, metric), values in got.items():
    bound = floor * min(values) if metric == "busbw_gbps" else ceiling * max(values)
    expect[grid] = {"allreduce": {size_text: {metric: round(bound, 6)}}}
print(json.dumps(expect))
PY
  )
  echo "thresholds: $EXPECT"
  conf "$W/expect.yaml" "${HOSTS// /,}" 2x1 "$EXPECT"
  echo "== 2. control: bisect --hosts, no load (want exit 0, exclude: empty)"
  time "$PY" -m envmatrix bisect --hosts "$W/hosts.txt" conf="$W/expect.yaml" --grid 1x1 --out "$W/control"; echo "exit $?"
  echo "== 3. loaded: a matmul loop on GPU 1 (gpuhostB) for the whole bisect (want exit 1, exclude: gpuhostB)"
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
