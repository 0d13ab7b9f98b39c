#!/usr/bin/env bash
# Issue 14 on the 2xH200 box (~5-6 min, timeout 600): envmatrix with the warm pool (probe.teardown destroy and exit)
# vs the naive mpirun loop on the same 8
# passing setups, 2 rounds; each round runs 1x2 (pool, naive) then 1x1 packed (--jobs auto = 2 lanes, pool, naive
# -np 1), the order of sides alternating per round; then, while the device time allows, the proof that per-run
# NCCL variables reach pooled children (PAT fails, NCCL_DEBUG=INFO logs, NCCL_PROTO shows in the log).
# usage (repo root, on the box): bash benchmarks/h200x2_throughput.sh      outputs: $OUT/throughput_h200.tar.gz, $OUT/summary.txt
set -uo pipefail
source benchmarks/box_env.sh
W="$OUT/throughput_h200"; mkdir -p "$W"
S="$OUT/summary.txt"
{
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
t0=$(date +%s)
echo "== 8 setups, 1x2 and 1x1 --jobs auto, pool vs naive, 2 rounds interleaved"
timeout 330 python3 benchmarks/throughput_bench.py --conf benchmarks/throughput_h200.yaml --grid 1x2,1x1 --jobs auto --backend nccl --rounds 2 --sides pool,pool_exit,naive --out "$W/tp" | grep -v '^{'
echo "== throughput part: $(( $(date +%s) - t0 )) s"
[ $(( $(date +%s) - t0 )) -lt 300 ] || { echo "== proof skipped: device time"; exit 0; }
echo "== proof: pooled vs --no-pool outcomes (setup outcome start root-cause)"
for side in pool no_pool; do
  flag=""; [ "$side" = no_pool ] && flag="--no-pool"
  timeout 45 python3 -m envmatrix sweep conf=benchmarks/throughput_proof.yaml --out "$W/proof_$side" --rerun $flag >/dev/null 2>&1
  python3 - "$W/proof_$side/results.json" "$side" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    starts = sorted({k["versions"].get("start", "?") for k in r["ranks"] if k.get("versions")})
    print(sys.argv[2], r["setup"]["name"], r["outcome"], starts, ((r["root_cause"] or {}).get("line") or "")[:160])
PY
done
for side in pool no_pool; do
  for s in proto_ll proto_simple; do
    echo "-- $side $s: NCCL log lines naming the protocol"
    grep -h -E "NCCL_PROTO set by environment|Proto|protocol" "$W"/proof_$side/logs/1x2_${s}_*/*/rank0.log | sort | uniq -c | head -5
  done
done
} 2>&1 | tee "$S"
tar -C "$OUT" -czf "$OUT/throughput_h200.tar.gz" throughput_h200 && rm -rf "$W"
