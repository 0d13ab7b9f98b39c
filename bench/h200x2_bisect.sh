#!/usr/bin/env bash
# Issue 11 on the 2xH200 box (run from the repo root: bash bench/h200x2_bisect.sh; ~5-7 s per probe, < 6 min):
#  1. two failures, the first masking the second (NCCL_NET=IB at init hides NCCL_ALGO=PAT), 11 vars, 1x2;
#  2. the interacting pair NCCL_P2P_DISABLE=1 + NCCL_SHM_DISABLE=1 among 10 harmless vars, forbid NET, 1x2;
#  3. sweep conf=aws_ofi on [1x2,2x1], then bisect --failing 2x1 reusing the sweep's results as free probes.
# --no-repair on 1 and 3 keeps the time bounded (the repair tries every catalogued value of each culprit).
# Outputs: $OUT/h200x2_bisect.tar.gz (json + md of each run, no logs) and $OUT/summary.txt (exit codes).
set -uo pipefail
source bench/box_env.sh
W=$(mktemp -d)
t0=$SECONDS
{
python3 -m envmatrix bisect --grid 1x2 --env-file bench/h200_bisect/two_failures.sh --no-repair \
  --out $W/two_failures --json $W/two_failures/bisect.json > $W/two_failures.out 2>&1
echo "two_failures exit=$? t=$((SECONDS - t0))s"
python3 -m envmatrix bisect 'probe.forbid_transport=[NET]' --grid 1x2 --env-file bench/h200_bisect/pair10.sh \
  --out $W/pair10 --json $W/pair10/bisect.json > $W/pair10.out 2>&1
echo "pair10 exit=$? t=$((SECONDS - t0))s"
python3 -m envmatrix sweep conf=aws_ofi "grids=[1x2,2x1]" --out $W/aws > $W/aws_sweep.out 2>&1
echo "aws_ofi sweep exit=$? t=$((SECONDS - t0))s"
python3 -m envmatrix bisect conf=aws_ofi --failing 2x1 --no-repair --out $W/aws --json $W/aws/bisect.json > $W/aws_bisect.out 2>&1
echo "aws_ofi bisect --failing 2x1 exit=$? t=$((SECONDS - t0))s"
} | tee $W/summary.txt
cp $W/summary.txt $OUT/summary.txt
for d in two_failures pair10 aws; do rm -rf $W/$d/logs $W/$d/*.sqlite* $W/$d/report.html; done
(cd $W && tar czf $OUT/h200x2_bisect.tar.gz summary.txt *.out two_failures pair10 aws)
