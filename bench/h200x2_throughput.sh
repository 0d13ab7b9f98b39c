#!/usr/bin/env bash
# Issue 14 on the 2xH200 box (< 6 min): envmatrix with the warm pool vs the naive mpirun loop, interleaved,
# 8 passing setups on 1x2; packing 1x1 runs (--jobs auto) vs the naive loop with -np 1; then the proof that
# per-run NCCL variables reach pooled children (PAT fails, NCCL_DEBUG=INFO logs, NCCL_PROTO shows in the log).
# usage (repo root, on the box): bash bench/h200x2_throughput.sh      outputs: $OUT/throughput_h200.tar.gz, $OUT/summary.txt
set -uo pipefail
source bench/box_env.sh
W="$OUT/throughput_h200"; mkdir -p "$W"
S="$OUT/summary.txt"
{
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
echo "== 1x2, 8 setups: pool vs naive, 2 rounds interleaved"
timeout 200 python3 bench/throughput_bench.py --conf bench/throughput_h200.yaml --grid 1x2 --backend nccl --rounds 2 --sides pool,naive --out "$W/x2" | grep -v '^{'
echo "== 1x1 packed (--jobs auto) vs naive -np 1, 1 round"
timeout 150 python3 bench/throughput_bench.py --conf bench/throughput_h200.yaml --grid 1x1 --backend nccl --rounds 1 --sides pool,naive --jobs auto --out "$W/x1" | grep -v '^{'
echo "== proof: pooled vs --no-pool outcomes (setup outcome start root-cause)"
for side in pool no_pool; do
  flag=""; [ "$side" = no_pool ] && flag="--no-pool"
  timeout 90 python3 -m envmatrix sweep conf=bench/throughput_proof.yaml --out "$W/proof_$side" --rerun $flag >/dev/null 2>&1
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
