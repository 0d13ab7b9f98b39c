#!/usr/bin/env bash
# Issue 37 on a real GPU: `envmatrix search` with the scale plan over benchmarks/gpu_search_scale.yaml (8 variables,
# 72,000 configs, emulated 2x1 on one GPU), 150 trials, resumable across device calls (the study lives in $RUN on
# the box, outside the carried checkout); when the search has ended, its export. Every call archives the run to $OUT.
#   bash benchmarks/gpu_search_scale.sh [seconds]      (repeat until it prints "search exit: 0" or 1)
set -uo pipefail
budget=${1:-500}
RUN=${RUN:-/tmp/gpu_search_scale}
source benchmarks/box_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
start=$(date +%s)
timeout --signal=INT --kill-after=30 "$budget" \
  python3 -m envmatrix search conf=benchmarks/gpu_search_scale.yaml --emulate-hosts --out "$RUN" \
  | grep -vE "^\s*$" | tail -40
rc=${PIPESTATUS[0]}
echo "search exit: $rc after $(( $(date +%s) - start )) s"
if [ "$rc" = 0 ] || [ "$rc" = 1 ]; then
  python3 -m envmatrix export --out "$RUN" | tail -20
fi
tar -C "$(dirname "$RUN")" -czf "$OUT/gpu_search_scale.tar.gz" --exclude='*/logs/*' "$(basename "$RUN")"
