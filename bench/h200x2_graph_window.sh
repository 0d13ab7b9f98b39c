#!/usr/bin/env bash
# Issue 16 diagnosis on the 2xH200 box (~40 s, carry .whl): bench/graph_window_diag.py, one process per GPU.
# Output: $OUT/graph_window.jsonl (one line per size, variant and repeat: skew, window and device us per op per rank).
set -uo pipefail
source bench/box_env.sh
timeout 150 python3 -m torch.distributed.run --nproc-per-node 2 bench/graph_window_diag.py >"$OUT/graph_window.jsonl" 2>"$OUT/graph_window.err"
python3 - "$OUT/graph_window.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for size in sorted({r["size"] for r in rows}):
    for v in ("as_is", "warm", "warm_gloo"):
        sel = [r for r in rows if r["size"] == size and r["variant"] == v]
        if not sel:
            continue
        med = lambda xs: round(statistics.median(xs), 2)
        print(f"{size:>7} {v:<9} skew {med([r['skew_us(r1-r0)'] for r in sel]):>8} us  window r0/r1 "
              f"{med([r['window_us'][0] for r in sel])}/{med([r['window_us'][1] for r in sel])}  mean "
              f"{med([sum(r['window_us'])/2 for r in sel])}  device r0/r1 {med([r['device_us'][0] for r in sel])}/{med([r['device_us'][1] for r in sel])}")
PY
tail -5 "$OUT/graph_window.err"
