#!/usr/bin/env bash
# Issue 20 item 1 on the 2xH200 box, ~3-4 min: the packaged thresholds conf=h200_expect_2gpu (busbw floors = recorded
# runs minus 10%) on the default env (expected: every floor met, exit 0), then the same sweep plus a setup with
# NVLink P2P off (SHM, ~10x lower busbw: expected slow, exit 1, measured / expected per point), then a bench of the
# default env against the first run as --baseline --tolerance 10% (expected exit 0). Outputs: console.log,
# matrix.md of each step, and a tarball of the run directories in $OUT.
# Run from the repo root: bash benchmarks/h200x2_thresholds.sh
set -uo pipefail
source benchmarks/box_env.sh
W="$OUT/h200x2_thresholds"
mkdir -p "$W"
{
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  echo "== 1. default env against the packaged floors (want exit 0)"
  time python3 -m envmatrix sweep conf=h200_expect_2gpu --out "$W/met"; echo "exit $?"
  echo "== 2. plus NCCL_P2P_DISABLE=1 (want exit 1: that setup slow, baseline pass)"
  time python3 -m envmatrix sweep conf=h200_expect_2gpu setups.no_p2p.NCCL_P2P_DISABLE=1 --out "$W/slow"; echo "exit $?"
  echo "== 3. bench against run 1 as a baseline, tolerance 10% (want exit 0)"
  time python3 -m envmatrix bench conf=h200_expect_2gpu --setup baseline --grid 1x2 -c allreduce,alltoall -b 256M -e 1G -f 4 \
    --baseline "$W/met" --tolerance 10% --out "$W/baseline"; echo "exit $?"
  python3 - "$W" <<'PY'
import json, sys
for step in ("met", "slow"):
    for r in json.load(open(f"{sys.argv[1]}/{step}/results.json"))["results"]:
        print(step, r["grid"], r["setup"]["name"], r["outcome"])
        for c in r.get("thresholds", []):
            print("   ", "met " if c["met"] else "SLOW", c["line"])
PY
} > "$W/console.log" 2>&1
cp "$W/met/matrix.md" "$OUT/met_matrix.md"; cp "$W/slow/matrix.md" "$OUT/slow_matrix.md"; cp "$W/console.log" "$OUT/console.log"
tar -C "$OUT" -czf "$OUT/h200x2_thresholds.tar.gz" h200x2_thresholds && rm -rf "$W"
tail -n 60 "$OUT/console.log"
