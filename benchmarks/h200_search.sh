#!/usr/bin/env bash
# Issue 5 on the 4xH200 box: one envmatrix search over a conf's whole space with the brute-force sampler
# (= the exhaustive sweep that benchmarks/search_efficiency.py replays), resumable across device calls:
# the run directory lives under reports/runs (kept on the box between calls) and is archived to $OUT/<conf>.tar.gz.
#   bash benchmarks/h200_search.sh search_h200_1x4 48 [seconds]
set -uo pipefail
conf=$1 trials=$2 budget=${3:-540}
source benchmarks/box_env.sh
run=reports/runs/$conf
timeout --signal=INT --kill-after=20 "$budget" \
  python3 -m envmatrix search conf="$conf" search.sampler=bruteforce --trials "$trials" --out "$run" \
  | grep -vE "^\s*$"
echo "search exit: ${PIPESTATUS[0]}"
# one archive per run: the device tool brings back only a few files per call
tar -C reports/runs -czf "$OUT/$conf.tar.gz" "$conf"
