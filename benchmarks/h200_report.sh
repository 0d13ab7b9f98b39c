#!/usr/bin/env bash
# Issues 15 + 21 on the 2xH200 box: one run directory holding a sweep, two benches and a structured search
# with its confirmation rounds (top 2 + the default, interleaved) and the export decision, then
# `envmatrix report` on it (each command also rewrites report.html itself) and `envmatrix diff` of it
# against itself (must exit 0). Everything comes back as one archive: $OUT/h200_report.tar.gz.
#   bash benchmarks/h200_report.sh            # ~7 min
set -uo pipefail
source benchmarks/box_env.sh
run=reports/runs/h200_report
mkdir -p "$run"
step() { echo "== $*"; }
step sweep; timeout 220 python3 -m envmatrix sweep conf=h200_transports "grids=[1x2,2x1]" probe.nccl_debug=INFO --out "$run" \
  --junit "$run/sweep_junit.xml" | tail -4
step bench 1x2; timeout 90 python3 -m envmatrix bench --grid 1x2 -b 1M -e 256M -f 4 -n 10 -w 3 \
  -c allreduce,allgather,alltoall --out "$run" | tail -2
step bench 2x1; timeout 90 python3 -m envmatrix bench --grid 2x1 -b 1M -e 256M -f 4 -n 10 -w 3 \
  -c allreduce,allgather,alltoall --out "$run" | tail -2
step search; timeout --signal=INT --kill-after=20 300 python3 -m envmatrix search conf=search_h200_2x2 "grids=[2x1]" \
  search.sampler=structured search.confirm_top_k=2 search.study_name=search_confirm_2x1 --trials 6 --out "$run" | tail -12
step export; python3 -m envmatrix export --out "$run" | tail -8
step report; python3 -m envmatrix report "$run"; echo "report exit $?"
step diff; python3 -m envmatrix diff "$run" "$run"; echo "diff exit $? (0 expected)"
tar -C reports/runs -czf "$OUT/h200_report.tar.gz" --exclude=logs h200_report
ls -la "$run"
