#!/usr/bin/env bash
# Issue 37, cheap fidelity first on a real GPU: `envmatrix search` over benchmarks/gpu_search_screen.yaml with its
# screen (on) or with search.screen=null (off), the same seed and search.budget_s; then its export. Archives the run
# to $OUT.   bash benchmarks/gpu_search_screen.sh on|off
set -uo pipefail
mode=${1:?on or off}
RUN=/tmp/gpu_search_screen_$mode
extra=()
[ "$mode" = off ] && extra=(search.screen=null)
source benchmarks/box_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
start=$(date +%s)
timeout --signal=INT --kill-after=30 570 \
  python3 -m envmatrix search conf=benchmarks/gpu_search_screen.yaml "${extra[@]}" --emulate-hosts --out "$RUN" \
  | grep -vE "^\s*$" | grep -vE "^trial [0-9]+:" | tail -45
rc=${PIPESTATUS[0]}
echo "search exit: $rc after $(( $(date +%s) - start )) s"
if [ "$rc" = 0 ] || [ "$rc" = 1 ]; then
  python3 -m envmatrix export --out "$RUN" | tail -12
fi
tar -C "$(dirname "$RUN")" -czf "$OUT/gpu_search_screen_$mode.tar.gz" --exclude='*/logs/*' "$(basename "$RUN")"
