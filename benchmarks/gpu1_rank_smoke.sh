#!/usr/bin/env bash
# One-GPU box check of the rank side on real NCCL (run from the repo root on the lent box, carry [".whl"]):
# a pooled and a cold 1x1 sweep of the 8 throughput setups, a failing setup's root cause, and bench 1x1
# through the direct NCCL launches (ncclMemAlloc buffers) in host and graph timing.
# usage: bash benchmarks/gpu1_rank_smoke.sh      outputs: $OUT/summary.txt, $OUT/gpu1_smoke.tar.gz  (~2 min)
set -uo pipefail
source benchmarks/box_env.sh
OUT=${OUT:-/tmp/gpu1_smoke}; W="$OUT/gpu1_smoke"; mkdir -p "$W"; S="$OUT/summary.txt"
{
  echo "== box"; nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS)='
  for side in pool no_pool; do
    flag=""; [ "$side" = no_pool ] && flag="--no-pool"
    echo "== sweep 1x1 ($side)"
    /usr/bin/time -f "wall %e s" timeout 200 python3 -m envmatrix sweep conf=benchmarks/throughput_h200.yaml 'grids=[1x1]' $flag --out "$W/sweep_$side" 2>&1 | tail -n 14
    echo "rc=${PIPESTATUS[0]}"
  done
  echo "== failing setup (NCCL_PROTO=bogus), 1x1"
  timeout 120 python3 -m envmatrix sweep conf=benchmarks/throughput_h200.yaml 'grids=[1x1]' '+setups.bogus={NCCL_PROTO: bogus_proto}' \
    --out "$W/fail" --allow-unknown-vars 2>&1 | grep -E "bogus|root cause|rank 0" | head -n 8
  python3 - "$W" <<'PY'
import json, sys, pathlib
for d in ("sweep_pool", "sweep_no_pool", "fail"):
    p = pathlib.Path(sys.argv[1]) / d / "results.json"
    if not p.exists():
        print(d, "no results.json"); continue
    for r in json.loads(p.read_text())["results"]:
        starts = sorted({k.get("versions", {}).get("start", "?") for k in r["ranks"]})
        t = (r["ranks"][0].get("timings") or {}) if r["ranks"] else {}
        print(d, r["setup"]["name"], r["outcome"], starts, "init %.2f teardown %.2f" % (t.get("init_s", -1), t.get("teardown_s", -1)),
              ((r.get("root_cause") or {}).get("line") or "")[:140])
PY
  for timing in host graph; do
    echo "== bench 1x1 $timing"
    timeout 150 python3 -m envmatrix bench --grid 1x1 -b 8 -e 64M -f 8 -n 20 -w 5 -c allreduce,allgather,alltoall --timing $timing \
      --out "$W/bench_$timing" 2>&1 | tail -n 30
    echo "rc=${PIPESTATUS[0]}"
  done
} > "$S" 2>&1
tar -C "$OUT" -czf "$OUT/gpu1_smoke.tar.gz" --exclude='*.sqlite*' gpu1_smoke && rm -rf "$W"
tail -n 80 "$S"
