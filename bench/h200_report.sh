#!/usr/bin/env bash
# Issue 15 on the 2xH200 box: one run directory holding a sweep, two benches and a search, then
# `envmatrix report` on it (each command also rewrites report.html itself) and `envmatrix diff` of it
# against itself (must exit 0). Everything comes back as one archive: $OUT/h200_report.tar.gz.
#   bash bench/h200_report.sh            # ~5 min
set -uo pipefail
source bench/box_env.sh
run=reports/runs/h200_report
mkdir -p "$run"
step() { echo "== $*"; }
step sweep; timeout 200 python3 -m envmatrix sweep conf=h200_transports "grids=[1x2,2x1]" --out "$run" \
  --junit "$run/sweep_junit.xml" | tail -4
step bench 1x2; timeout 90 python3 -m envmatrix bench --grid 1x2 -b 1M -e 256M -f 4 -n 10 -w 3 \
  -c allreduce,allgather,alltoall --out "$run" | tail -2
step bench 2x1; timeout 90 python3 -m envmatrix bench --grid 2x1 -b 1M -e 256M -f 4 -n 10 -w 3 \
  -c allreduce,allgather,alltoall --out "$run" | tail -2
step search; timeout 150 python3 -m envmatrix search conf=search_h200_2x2 "grids=[2x1]" --trials 8 --out "$run" | tail -4
step report; python3 -m envmatrix report "$run"; echo "report exit $?"
step diff; python3 -m envmatrix diff "$run" "$run"; echo "diff exit $? (0 expected)"
tar -C reports/runs -czf "$OUT/h200_report.tar.gz" --exclude=logs h200_report
ls -la "$run"
