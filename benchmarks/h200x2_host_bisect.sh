#!/usr/bin/env bash
# Host bisect names the GPU made slow by a competing compute load. Takes NGPU (default 2: issue 20 on the 2xH200 box,
# ~2 min; NGPU=4 on a 4-GPU box, ~2-4 min: issue 19's owed run) and SLOW (the host whose GPU gets the load: default
# gpuhostB with 2 GPUs, the third host, gpuhostC, with more). Run it with timeout 400: every envmatrix command has its
# own `timeout`, all of them within BUDGET seconds (default 330) from the first.
# NGPU emulated hosts, one per GPU: gpuhostA on GPU 0, gpuhostB on GPU 1, ..., reached by the box's real mpirun
# through a plm_rsh_agent that gives each its own hostname (unshare --uts, as the CPU namespace test bed does) and its
# own CUDA_VISIBLE_DEVICES. NCCL sees NGPU hosts (their hostnames differ): NET over sockets (NCCL_IB_DISABLE=1).
# Why this shape (earlier records on this box, benchmarks/host_bisect_costs.md): two hosts per GPU cannot work:
# two ranks of one GPU in two processes time-slice that GPU, so a same-GPU pair is 25x slower than a cross-GPU
# pair with no load at all and no per-grid floor fits both. One host per GPU: a loaded GPU's pairs lose 0.4x of
# their busbw at 256 KiB, and a one-rank allreduce (a host alone, 1x1) has no bus bandwidth, but its time does show
# a GPU shared with a compute load (each operation waits for the GPU's time slice): 11-12x on 2xH200.
# Which groups are judged by floors is the planner's (envmatrix.bisect.hosts.localise, asked here with the load's
# expected effect: SLOW's groups slow, the others fine). Two hosts: every group (the pair 2x1, each host alone
# 1x1). Four or more: pairs are judged against their round's median (docs/bisect.md "Slow hosts": slow below a
# quarter of it, so with two pairs a round, below 1/7 of the other pair), so floors only judge the other groups: all
# hosts together (the control's confirming round, e.g. 4x1), SLOW alone (1x1) and the rest together (e.g. 3x1).
# If the load slows SLOW's pairs by less than 7x, no pair is slow and the bisect judges the hosts together by the
# 4x1 floor: exit 0, or a search of that group; the console's summary prints each pair's ratio to its round.
# Steps:
#   1. calibrate, no load: a host bisect without thresholds (the healthy path's groups) and a sweep of each other
#      group the planner judges by floors; busbw floor = FLOOR x the lowest busbw per grid (0.7 with two hosts: the
#      loaded pair measured 0.4x on 2xH200; 0.5 with more), 1x1 ceiling = CEILING (3) x the highest time;
#   2. control: `envmatrix bisect --hosts` against those, no load (want exit 0, `exclude: ` empty);
#   3. loaded: the same with BURNERS bf16 matmul loops (1 with two hosts, 2 with more) on SLOW's GPU for the whole
#      command (separate processes, started and killed here) (want exit 1, `exclude: gpuhostB` / `gpuhostC`; as
#      the planner runs with that fault: two hosts 2 rounds, 3 runs (the pair slow, then each host alone); four
#      hosts 3 rounds, 6 runs (two pair rounds, SLOW's pair slow in both, then SLOW alone beside the rest together)).
# mpirun binds each rank to one core by default with 2 ranks; NCCL's proxy and socket threads then share it (36 ms
# per 256 KiB allreduce between two emulated hosts): the confs pass --bind-to none, as a real host's many cores allow.
# The box exports OMPI_MCA_plm=isolated (mpirun may start ranks on this node only: every other --host is "already
# filled"); the confs pass --mca plm rsh so the agent starts each emulated host's daemon.
# Every process, the load included, has NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1.
# Outputs: console.log and a tarball of the run directories in $OUT.
# Run from the repo root: OUT=/tmp/hb bash benchmarks/h200x2_host_bisect.sh     (2 GPUs)
#                         NGPU=4 SLOW=C OUT=/tmp/hb4 bash benchmarks/h200x2_host_bisect.sh     (4 GPUs)
# (SIZE/MIN_SIZE/ITERS/WARMUP/FLOOR/CEILING/BURNERS/BUDGET/PROBE_TIMEOUT from the environment)
# CPU rehearsal (gloo, no GPU, no load: checks the agent, configs, calibration and parsing; needs root, unshare,
# mpirun): [NGPU=4] REHEARSAL=1 OUT=/tmp/x bash benchmarks/h200x2_host_bisect.sh
# One-GPU rehearsal on real NCCL (every host on GPU 0, no load): ONE_GPU=1 bash benchmarks/h200x2_host_bisect.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NGPU=${NGPU:-2}
LETTERS=(A B C D E F G H)
case "$NGPU" in
  [2-8]) ;;
  *) echo "h200x2_host_bisect: NGPU=$NGPU; allowed: 2 to 8 (one emulated host per GPU)" >&2; exit 2 ;;
esac
HOSTS=$(for ((i = 0; i < NGPU; i++)); do printf 'gpuhost%s ' "${LETTERS[$i]}"; done); HOSTS=${HOSTS% }
SLOW=${SLOW:-$([ "$NGPU" = 2 ] && echo B || echo C)}
SLOW_GPU=
for ((i = 0; i < NGPU; i++)); do [ "${LETTERS[$i]}" = "$SLOW" ] && SLOW_GPU=$i; done
if [ -z "$SLOW_GPU" ]; then
  echo "h200x2_host_bisect: SLOW=$SLOW; allowed: one of ${LETTERS[*]:0:$NGPU} (the host whose GPU gets the load)" >&2
  exit 2
fi
SLOW_HOST=gpuhost$SLOW
# Two hosts: a floor judges the pair, so it sits close (0.7x) to catch the loaded pair's 0.4x. More hosts: floors
# judge only groups without the load (all together, the rest), so they leave room for noise (0.5x), and the load
# must slow its pairs by 7x (a round's two pairs: slow below a quarter of their median): at 256 KiB one loop added
# ~330 us to a 220 us pair op (2xH200), so the figure is at 16 KiB, whose unloaded op is mostly latency, with two
# matmul loops on the GPU (untried: a guess for the first 4-GPU run). Each run also measures from MIN_SIZE up, so
# the record shows how the load's effect varies with size.
if [ "$NGPU" = 2 ]; then MANY=0; else MANY=1; fi
if [ "${REHEARSAL:-0}" = 1 ]; then
  BACKEND=gloo SIZE=1M ITERS=3 WARMUP=1 PY=${PY:-python3}
  export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-$PWD}
  # gloo on a shared 2-core VM: one unloaded pair measured 2.44 GB/s calibrating and 0.99 in the control, so the
  # rehearsal's floors and ceilings only catch what is many times off (they check the mechanics, not the figures)
  FLOOR=${FLOOR:-0.1} CEILING=${CEILING:-10}
else
  # 256K, not 32M: a small collective waits a whole time slice of the GPU the load shares
  BACKEND=nccl SIZE=${SIZE:-$([ $MANY = 1 ] && echo 16K || echo 256K)} ITERS=${ITERS:-30} WARMUP=${WARMUP:-5} PY=python3
  FLOOR=${FLOOR:-$([ $MANY = 1 ] && echo 0.5 || echo 0.7)}
  source benchmarks/box_env.sh
fi
MIN_SIZE=${MIN_SIZE:-$([ $MANY = 1 ] && echo 4K || echo "$SIZE")}
BURNERS=${BURNERS:-$([ $MANY = 1 ] && echo 2 || echo 1)}
CEILING=${CEILING:-3} BUDGET=${BUDGET:-330}
# a hung run fails inside its command's timeout (two hosts: as before)
PROBE_TIMEOUT=${PROBE_TIMEOUT:-$([ "$NGPU" = 2 ] && echo 120 || echo 60)}
W="$OUT/h200x2_host_bisect"
mkdir -p "$W"
BURN_PID=
cleanup() { [ -n "$BURN_PID" ] && kill $BURN_PID 2>/dev/null; wait 2>/dev/null; }
# The ranks resolve MASTER_ADDR (the first host's name): /etc/hosts gets the hosts' names for the run only.
cp /etc/hosts "$OUT/etc_hosts.orig"
trap 'cleanup; cat "$OUT/etc_hosts.orig" > /etc/hosts; rm -f "$OUT/etc_hosts.orig"' EXIT

# The agent: ssh semantics (HOST CMD...), the command run under the host's own hostname and GPU.
{
  echo '#!/bin/sh'
  echo 'host=$1; shift'
  echo 'case "$host" in'
  for ((i = 0; i < NGPU; i++)); do
    echo "  gpuhost${LETTERS[$i]}) gpu=$([ "${ONE_GPU:-0}" = 1 ] && echo 0 || echo $i) ;;"
  done
  echo '  *) echo "h200x2 agent: unknown host $host" >&2; exit 255 ;;'
  echo 'esac'
  echo 'export CUDA_VISIBLE_DEVICES=$gpu NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1'
  echo 'exec unshare --uts sh -c "hostname $host; $*"'
} > "$W/agent.sh"
chmod +x "$W/agent.sh"
i=10; for h in $HOSTS; do echo "127.0.1.$i $h" >> /etc/hosts; i=$((i + 1)); done
printf '%s slots=1\n' $HOSTS > "$W/hosts.txt"
DEADLINE=$(( $(date +%s) + BUDGET ))
limit() {  # limit CAP: seconds for the next command, CAP at most, within the budget left
  local left=$(( DEADLINE - $(date +%s) ))
  [ "$left" -lt "$1" ] && echo $(( left > 5 ? left : 5 )) || echo "$1"
}

conf() {  # conf FILE HOSTS GRID [EXPECT_JSON]
  "$PY" - "$1" "$BACKEND" "$SIZE" "$ITERS" "$WARMUP" "$W/agent.sh" "$2" "$3" "${4:-null}" "$PROBE_TIMEOUT" "$MIN_SIZE" <<'PY'
import json, sys
path, backend, size, iters, warmup, agent, hosts, grid, expect, probe_timeout, min_size = sys.argv[1:]
setup = {"NCCL_IB_DISABLE": "1"} if backend == "nccl" else {}
conf = {"name": "h200x2_host_bisect", "backend": backend, "launcher": "mpirun", "hosts": hosts.split(","),
        "launcher_opts": {"mpirun": {"extra_args": ["--mca", "plm", "rsh", "--mca", "plm_rsh_agent", agent,
                                                  "--bind-to", "none"]}}, "setups": {"base": setup},
        "grids": [grid],
        "probe": {"timeout_s": int(probe_timeout), "bench": {"collectives": ["allreduce"], "min_bytes": min_size, "max_bytes": size,
                                              "iters": int(iters), "warmup": int(warmup)}}}
if json.loads(expect):
    conf["expect"] = json.loads(expect)
open(path, "w").write(json.dumps(conf, indent=1))  # JSON is YAML: no yaml module needed on the box
PY
}

{
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi (rehearsal)"
  mpirun --version | head -1
  echo "== $NGPU hosts (${HOSTS// /, }), one per GPU; the load ($BURNERS matmul loop(s)) goes on $SLOW_HOST (GPU $SLOW_GPU);"
  echo "   allreduce $MIN_SIZE..$SIZE (figures and thresholds at $SIZE), $ITERS iterations; budget ${BUDGET} s"
  # The groups the planner judges by floors, healthy and with SLOW slow (pairs of 4+ hosts are judged relatively):
  # the first line says whether pairs are judged relatively, each other line is a group only the loaded path runs.
  PLAN=$("$PY" - "${HOSTS// /,}" "$SLOW_HOST" <<'PY'
import sys
from envmatrix.bisect.hosts import OK, SLOW, Evidence, localise
hosts, slow = sys.argv[1].split(","), sys.argv[2]
def groups_run(bad):
    seen = []
    def run_round(number, groups):
        seen.extend(groups)
        return [Evidence(number, g, SLOW if bad in g else OK, "planned", 0.1 if bad in g else 1.0) for g in groups]
    return seen, localise(hosts, run_round, relative=True)
healthy, _ = groups_run(None)
loaded, result = groups_run(slow)
relative = result.pairs is not None
judged = [g for g in dict.fromkeys(healthy + loaded) if not (relative and len(g) == 2)]
print(f"planner: healthy runs {[','.join(g) for g in healthy]}; with {slow} slow {[','.join(g) for g in loaded]} "
      f"(exclude: {','.join(result.exclude)}, {result.rounds} rounds, {result.runs} runs); pairs judged "
      f"{'by their round' if relative else 'by floors'}; judged by floors: {[','.join(g) for g in judged]}", file=sys.stderr)
print(int(relative))
for g in judged:
    if g not in healthy:
        print(",".join(g))
PY
  )
  RELATIVE=$(echo "$PLAN" | head -n 1)
  echo "== 1. calibrate, no load: bisect --hosts without thresholds (the healthy path's groups) and a sweep of each group"
  echo "   only the loaded path runs ($(echo "$PLAN" | tail -n +2 | tr '\n' ' '));"
  echo "   busbw floor per grid = ${FLOOR}x the lowest busbw, 1x1 ceiling = ${CEILING}x the highest time"
  [ "$RELATIVE" = 1 ] && echo "   (no 2x1 floor: pairs are judged against their round's median)"
  conf "$W/plain.yaml" "${HOSTS// /,}" 2x1
  time timeout -k 15 "$(limit 120)" "$PY" -m envmatrix bisect --hosts "$W/hosts.txt" conf="$W/plain.yaml" --grid 1x1 --out "$W/cal_pair"; echo "exit $?"
  for group in $(echo "$PLAN" | tail -n +2); do
    n=$(echo "$group" | tr ',' '\n' | wc -l)
    conf "$W/cal_${group//,/_}.yaml" "$group" "${n}x1"
    time timeout -k 15 "$(limit 60)" "$PY" -m envmatrix sweep conf="$W/cal_${group//,/_}.yaml" --out "$W/cal_${group//,/_}"; echo "exit $?"
  done
  EXPECT=$("$PY" - "$SIZE" "$FLOOR" "$CEILING" "$RELATIVE" "$W/cal_pair" "$W"/cal_gpuhost* <<'PY'
import json, os, sys
from envmatrix.bench.sizes import parse_size
from envmatrix.app.report import load_results
from envmatrix.judgement.thresholds import measured_points
size_text, floor, ceiling, relative = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
size, got = parse_size(size_text), {}
for run_dir in (d for d in sys.argv[5:] if os.path.isdir(d)):
    for r in load_results(run_dir, "calibration"):
        if relative and r.grid == "2x1":
            continue  # pairs are judged against their round's median, never against a floor
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
  time timeout -k 15 "$(limit 120)" "$PY" -m envmatrix bisect --hosts "$W/hosts.txt" conf="$W/expect.yaml" --grid 1x1 --out "$W/control"; echo "exit $?"
  echo "== 3. loaded: $BURNERS matmul loop(s) on GPU $SLOW_GPU ($SLOW_HOST) for the whole bisect (want exit 1, exclude: $SLOW_HOST)"
  if [ "${REHEARSAL:-0}" = 1 ] || [ "${ONE_GPU:-0}" = 1 ]; then
    echo "(rehearsal: no GPU load; want exit 0 again)"
  else
    cat > "$W/burn.py" <<'PY'
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
    BURN_PID=
    for ((b = 0; b < BURNERS; b++)); do
      CUDA_VISIBLE_DEVICES=$SLOW_GPU "$PY" "$W/burn.py" > "$W/burn$b.log" 2>&1 &
      BURN_PID="$BURN_PID $!"
    done
    for _ in $(seq 60); do [ "$(cat "$W"/burn*.log | grep -c "burn started")" -ge "$BURNERS" ] && break; sleep 1; done
    cat "$W"/burn*.log
    nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader
  fi
  time timeout -k 15 "$(limit 150)" "$PY" -m envmatrix bisect --hosts "$W/hosts.txt" conf="$W/expect.yaml" --grid 1x1 --out "$W/loaded"; echo "exit $?"
  cleanup; BURN_PID=
  for f in "$W"/burn*.log; do [ -f "$f" ] && tail -n 2 "$f"; done
  echo "== summary"
  "$PY" - "$W" <<'PY'
import json, sys
for step in ("control", "loaded"):
    try:
        r = json.load(open(f"{sys.argv[1]}/{step}/host_bisect.json"))
    except OSError as e:
        print(step, "no report:", e)  # the command failed or ran past its timeout: its console lines above say why
        continue
    print(step, "exclude:", ",".join(r["exclude"]), "rounds", r["rounds"], "runs", r["runs"], "complete", r["complete"])
    if r.get("pairs"):
        print("    pairs:", r["pairs"]["summary"])
        for p in r["pairs"]["pairs"]:
            print(f"    pair round {p['round']} {','.join(p['hosts'])}: {p['gbps']:.3g} GB/s = {p['gbps'] / p['reference']:.2f}x "
                  f"its reference {p['reference']:.3g} ({'slow' if p['slow'] else 'fine'})")
    for h, v in r["verdicts"].items():
        print("   ", h, v["status"], v["why"])
    for e in r["evidence"]:
        print("    round", e["round"], ",".join(e["hosts"]), e["verdict"], e["run"])
PY
} > "$W/console.log" 2>&1
cp "$W/console.log" "$OUT/console.log"
tar -C "$OUT" -czf "$OUT/h200x2_host_bisect.tar.gz" h200x2_host_bisect && rm -rf "$W"
tail -n 60 "$OUT/console.log"
