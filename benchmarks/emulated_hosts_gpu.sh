#!/usr/bin/env bash
# Issue 38 on ONE GPU (H100 or H200), ~6-8 min in all (PARTS splits it): real NCCL multi-host runs through emulated hosts.
#   (1) seed 003's matrix shape with --emulate-hosts: conf/aws_ofi.yaml as the user runs it, then
#       benchmarks/emulated_hosts/seed003_shape.yaml (a culprit that fails only across hosts), and its
#       `bisect --failing 2x2`;
#   (2) a hidden two-failure env (NCCL_NET=IB + NCCL_ALGO=PAT among 10 harmless variables) bisected on 2x1 with the
#       built-in probe (target: <= 16 probes, < 120 s);
#   (3) bench and search through the warm pool on 2x1-shared, with the per-setup cost (search takes the shared-GPU
#       figures only because search.allow_shared_gpu_figures=true says so; they are not representative);
#   (4) throughput: 8 setups x 1x1 and 2x1-shared, the warm pool vs the naive `mpirun -np N python probe` loop;
#   (5) the GPU test of tests/test_emulated_hosts.py (2x1 sharing the GPU: one setup passes, NCCL_ALGO=PAT fails
#       only across the emulated hosts).
# usage (repo root, on the box, carry [".whl"]): bash benchmarks/emulated_hosts_gpu.sh
#        PARTS="1 2" bash benchmarks/emulated_hosts_gpu.sh   (a subset, e.g. to split the record over two calls:
#        PARTS="5 1 2" then PARTS="3 4"; all five in one call are expected to take ~6-8 min)
# outputs: $OUT/summary.txt (everything printed), $OUT/emulated_hosts.tar.gz (matrices, bisect JSON, throughput rows)
set -uo pipefail
source benchmarks/box_env.sh  # NVLS pins, carried wheels on PYTHONPATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
PARTS=" ${PARTS:-1 2 3 4 5} "
part() { [[ "$PARTS" == *" $1 "* ]]; }
W=${W:-/tmp/emulated_hosts}; rm -rf "$W"; mkdir -p "$W"  # W: two instances side by side (one per GPU) need their own
S="$OUT/summary.txt"
since() { echo "$(( $(date +%s) - $1 )) s"; }
{
echo "== box"
nvidia-smi --query-gpu=name,compute_mode,memory.total,driver_version --format=csv,noheader
"$PY" -c 'import torch; print("torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())), "gpus", torch.cuda.device_count())'
T0=$(date +%s)

if part 1; then
echo; echo "== (1a) envmatrix sweep conf=aws_ofi.yaml --emulate-hosts (the seed's own setups; its plugin is absent here)"
t=$(date +%s)
timeout 120 "$PY" -m envmatrix sweep conf=aws_ofi.yaml probe.timeout_s=40 --emulate-hosts --out "$W/aws_ofi" 2>&1 | grep -v '^\[' | tail -25
echo "-- rc ${PIPESTATUS[0]}, $(since $t)"

echo; echo "== (1b) seed 003's shape with a culprit that fails only across emulated hosts"
t=$(date +%s)
timeout 150 "$PY" -m envmatrix sweep conf=benchmarks/emulated_hosts/seed003_shape.yaml --emulate-hosts --out "$W/seed003" 2>&1 | grep -v '^\[' | tail -40
echo "-- rc ${PIPESTATUS[0]}, $(since $t)"
"$PY" - "$W/seed003/results.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
print("grid setup outcome placement nccl_hosts hostnames transport duration_s")
for r in sorted(rows, key=lambda r: (r["grid"], r["setup"]["name"])):
    p = r.get("placement") or {}
    hosts = sorted({k.get("hostname") or "?" for k in r["ranks"]})
    print(r["grid"], r["setup"]["name"], r["outcome"], p.get("label"), p.get("nccl_hosts"), ",".join(hosts),
          (r.get("nccl") or {}).get("transport"), r["duration_s"])
PY

echo; echo "== (1c) envmatrix bisect --failing 2x2 on that sweep"
t=$(date +%s)
timeout 120 "$PY" -m envmatrix bisect conf=benchmarks/emulated_hosts/seed003_shape.yaml --failing 2x2 --emulate-hosts \
  --out "$W/seed003" --json "$W/seed003/bisect.json" 2>&1 | grep -E "culprit|proven|probes|error|exit|^\(" | head -30
echo "-- rc ${PIPESTATUS[0]}, $(since $t)"
"$PY" - "$W/seed003/bisect.json" <<'PY'
import json, sys
try:
    reports = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit(f"no bisect JSON: {exc}")
for r in reports:
    print(r["name"], r["grid"], "status", r["status"], "culprits", r["culprits"], "probes launched", r["probes_launched"],
          "free", r["free_probes"])
PY

fi
if part 2; then
echo; echo "== (2) hidden two-failure env on 2x1 emulated hosts, built-in probe (target <= 16 probes, < 120 s)"
t=$(date +%s)
timeout 170 "$PY" -m envmatrix bisect --grid 2x1 --env-file benchmarks/emulated_hosts/hidden_two_failures.sh --emulate-hosts \
  --out "$W/hidden" --json "$W/hidden/bisect.json" 2>&1 | grep -E "culprit|proven|probes|signature|error|exit" | head -30
echo "-- rc ${PIPESTATUS[0]}, wall $(since $t)"
"$PY" - "$W/hidden/bisect.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit(f"no bisect JSON: {exc}")
for r in d:  # one report per bisected env
    print(r["name"], r["grid"], "status", r["status"], "culprits", r["culprits"], "probes launched", r["probes_launched"],
          "(to the answer", r["search_probes"], ") free", r["free_probes"], "recommended proven", r["recommended_proven"])
PY

fi
if part 3; then
echo; echo "== (3a) bench through the warm pool, 2x1 emulated hosts on one GPU (figures NOT representative)"
t=$(date +%s)
timeout 90 "$PY" -m envmatrix bench --grid 2x1 --emulate-hosts -c allreduce,allgather -b 1K -e 16M -f 4 -n 10 -w 2 --timeout 60 \
  --out "$W/bench" 2>&1 | tail -22
echo "-- rc ${PIPESTATUS[0]}, $(since $t)"

echo; echo "== (3b) search through the warm pool, 2x1 emulated hosts, 6 trials (per-setup cost; benchmarks/emulated_hosts/search_shared.yaml)"
if "$PY" -c 'import optuna' 2>/dev/null; then
  t=$(date +%s)
  timeout 120 "$PY" -m envmatrix search conf=benchmarks/emulated_hosts/search_shared.yaml --emulate-hosts \
    --out "$W/search" 2>&1 | tail -20
  rc=${PIPESTATUS[0]}; wall=$(( $(date +%s) - t ))
  echo "-- rc $rc, ${wall} s for the search command"
  "$PY" - "$W/search/results.sqlite" <<'PY'
import json, sqlite3, statistics, sys
try:
    with sqlite3.connect(sys.argv[1]) as db:
        rows = [json.loads(j) for (j,) in db.execute("SELECT result_json FROM results ORDER BY seq")]
except sqlite3.Error as exc:
    sys.exit(f"no stored results: {exc}")
if not rows:
    sys.exit("no stored results")
d = [r["duration_s"] for r in rows]
print(f"{len(d)} stored runs; per-setup (run) wall median {statistics.median(d):.2f} s, min {min(d):.2f}, max {max(d):.2f}; "
      f"placements {sorted({(r.get('placement') or {}).get('label') for r in rows})}")
PY
else
  echo "-- skipped: optuna is not importable here (carry its wheel in .whl)"
fi

fi
if part 4; then
echo; echo "== (4) throughput: 8 setups x 1x1 and 2x1-shared, pool vs naive loop, 1 round, sides alternating"
t=$(date +%s)
timeout 200 "$PY" benchmarks/throughput_bench.py --conf benchmarks/emulated_hosts/throughput8.yaml --grid 1x1,2x1 \
  --backend nccl --rounds 1 --sides pool,naive --emulate-hosts --out "$W/throughput" | grep -v '^{'
echo "-- $(since $t)"
fi
if part 5; then
echo; echo "== (5) GPU test: tests/test_emulated_hosts.py::test_two_emulated_hosts_share_one_gpu_with_real_nccl"
t=$(date +%s)
timeout 300 "$PY" -m pytest -q -n 0 -p no:cacheprovider tests/test_emulated_hosts.py -k two_emulated_hosts -rs 2>&1 | tail -15
echo "-- rc ${PIPESTATUS[0]}, $(since $t)"
fi
echo; echo "== total $(since $T0)"
} 2>&1 | tee "$S"
rm -rf "$W"/*/logs "$W"/throughput/*/logs
tar -C "$W" -czf "$OUT/emulated_hosts.tar.gz" . 2>/dev/null || true
