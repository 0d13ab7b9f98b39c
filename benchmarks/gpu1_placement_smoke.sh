#!/usr/bin/env bash
# One-GPU smoke of the bench rows' placement and the warm-up order on real NCCL (~1 min, carry .whl):
# `host` (direct launches: out-of-place) and `host-torch` (torch's own calls: allreduce, broadcast and reduce in place),
# 1x1, 8 B - 1 MiB. Outputs: $OUT/placement.txt (collective, timing, launch, in_place, wrong per row; the warm-up
# markers' count), $OUT/bench.log.
set -uo pipefail
source benchmarks/box_env.sh
for t in host host-torch; do
  timeout 150 python3 -m envmatrix bench --grid 1x1 -b 8 -e 1M -f 32 -n 20 -w 2 -c allreduce,allgather,broadcast,reduce \
    --timing $t --timeout 120 --out "$OUT/em_$t" >>"$OUT/bench.log" 2>&1 || echo "bench --timing $t rc=$?" >>"$OUT/bench.log"
done
python3 - "$OUT" >"$OUT/placement.txt" 2>&1 <<'PY'
import glob, json, sqlite3, sys
for db in sorted(glob.glob(f"{sys.argv[1]}/em_*/results.sqlite")):
    with sqlite3.connect(db) as c:
        for (row,) in c.execute("SELECT row_json FROM metrics ORDER BY seq"):
            r = json.loads(row)
            print(db.split("/")[-2], r["collective"], r["size_bytes"], r["timing"], r["launch"], "in_place", r["in_place"],
                  "wrong", r["wrong"], "time_us %.1f" % r["time_us"])
PY
cat "$OUT/placement.txt"
