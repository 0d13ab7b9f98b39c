#!/usr/bin/env bash
# Issues 21 + 15 (search bullet) on the 2xH200 box: a live structured search on an emulated 2x1 (NET/Socket between
# the two emulated nodes, where busbw moves +-15% between repeats), then the confirmation rounds and the export
# decisions (confirmed winner or "keep the default"; tuner.csv or why not). Everything is archived to
# $OUT/search_confirm_2x1.tar.gz (run dir: store, study, search.md, export/, logs) plus the console log.
#   bash bench/search_confirm_h200.sh [trials] [seconds]      # defaults: 6 trials, 480 s
set -uo pipefail
trials=${1:-6} budget=${2:-480}
source bench/box_env.sh
run=reports/runs/search_confirm_2x1
timeout --signal=INT --kill-after=20 "$budget" \
  python3 -m envmatrix search conf=search_h200_2x2 "grids=[2x1]" search.sampler=structured search.confirm_top_k=2 \
    search.study_name=search_confirm_2x1 --trials "$trials" --out "$run" 2>&1 | grep -vE "^\s*$" | tee "$OUT/search.log"
echo "search exit: ${PIPESTATUS[0]}" | tee -a "$OUT/search.log"
python3 -m envmatrix export --out "$run" 2>&1 | tee "$OUT/export.log"
tar -C reports/runs -czf "$OUT/search_confirm_2x1.tar.gz" search_confirm_2x1
