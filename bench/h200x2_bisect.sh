#!/usr/bin/env bash
# Issue 11 on the 2xH200 box (run from the repo root; < 7 min): (1) two independent culprits, the first
# masking the second (NCCL_NET=IB, NCCL_ALGO=PAT) on 1x2; (2) the P2P+SHM interaction with
# probe.forbid_transport=[NET] on 1x2; (3) sweep conf/aws_ofi.yaml on [1x2,2x1] then bisect --failing 2x1,
# reusing the stored sweep results. Only json + md come back ($OUT/<case>/), logs are dropped.
set -uo pipefail
source bench/box_env.sh
run() { local name=$1; shift; mkdir -p "$OUT/$name"
  local t=$1; shift; timeout "$t" python3 -m envmatrix "$@" --json "$OUT/$name/bisect.json" > "$OUT/$name/report.md" 2>&1
  echo "== $name rc=$?"; tail -n 25 "$OUT/$name/report.md"; }
run two_failures 200 bisect --grid 1x2 --env-file bench/h200_bisect/two_failures_1x2.sh --allow-unknown-vars --out /tmp/b11/two
run interaction 120 bisect 'probe.forbid_transport=[NET]' --grid 1x2 --env-file bench/h200_bisect/interaction_1x2.sh --allow-unknown-vars --out /tmp/b11/inter
mkdir -p "$OUT/aws_ofi"
timeout 120 python3 -m envmatrix sweep conf=aws_ofi.yaml 'grids=[1x2,2x1]' --out /tmp/b11/aws > "$OUT/aws_ofi/sweep.md" 2>&1
echo "== sweep rc=$?"; tail -n 15 "$OUT/aws_ofi/sweep.md"
run aws_ofi_bisect 120 bisect conf=aws_ofi --failing 2x1 --out /tmp/b11/aws
find "$OUT" -type f ! -name '*.json' ! -name '*.md' -delete
