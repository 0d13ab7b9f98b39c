#!/usr/bin/env bash
# Issue 11 on the 2xH200 box (run from the repo root, carry .whl; <= 6 min: 200 s + 150 s caps, ~3 min expected):
# (1) two independent culprits, the first masking the second (NCCL_NET=IB at init, NCCL_ALGO=PAT at the first
# collective) among 11 variables on 1x2; (2) the P2P+SHM interaction among 10 variables with
# probe.forbid_transport=[NET] on 1x2. (The aws_ofi sweep + bisect --failing 2x1 case is recorded in
# benchmarks/results/h200x2_bisect/run1.) Only json + md + wall times come back ($OUT/<case>/), logs are dropped.
# CPU dry-run of this script: OUT=/tmp/o DRY_PROBE_CMD="python3 $PWD/bench/h200_bisect/fake_box_probe.py" bash benchmarks/h200x2_bisect.sh
# (backend=gloo and that --probe-cmd are added; never set on the box).
set -uo pipefail
source benchmarks/box_env.sh
dry=(); [ -n "${DRY_PROBE_CMD:-}" ] && dry=(backend=gloo --probe-cmd "$DRY_PROBE_CMD")
run() { local name=$1; shift; mkdir -p "$OUT/$name"
  local t=$1; shift; local start; start=$(date +%s)
  timeout "$t" python3 -m envmatrix "$@" "${dry[@]}" --json "$OUT/$name/bisect.json" > "$OUT/$name/report.md" 2>&1
  local rc=$?; echo "rc=$rc wall_s=$(( $(date +%s) - start ))" > "$OUT/$name/rc_wall.txt"
  echo "== $name rc=$rc wall_s=$(( $(date +%s) - start ))"; tail -n 25 "$OUT/$name/report.md"; }
run two_failures 200 bisect --grid 1x2 --env-file benchmarks/h200_bisect/two_failures_1x2.sh --allow-unknown-vars --out /tmp/b11/two
run interaction 150 bisect 'probe.forbid_transport=[NET]' --grid 1x2 --env-file benchmarks/h200_bisect/interaction_1x2.sh --allow-unknown-vars --out /tmp/b11/inter
find "$OUT" -type f ! -name '*.json' ! -name '*.md' ! -name '*.txt' -delete
