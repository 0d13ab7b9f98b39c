#!/usr/bin/env bash
# Issue 4 on the 4xH200 box: bisect seed 003's setup (0) on 2x2 (real culprit there: NCCL_NET="AWS Libfabric",
# no such plugin on the box) and a real NCCL interaction on 1x4 (P2P and SHM both disabled -> NET/Socket,
# which the site policy probe.forbid_transport=[NET] forbids). Outputs land in $OUT/seed003 and $OUT/interaction.
set -uo pipefail
source benchmarks/box_env.sh
python3 -m envmatrix bisect --grid 2x2 --env-file benchmarks/h200_bisect/seed003_env0.sh --allow-unknown-vars \
  --out $OUT/seed003 --json $OUT/seed003/bisect.json | grep -E "^\[|error|report"
rm -rf $OUT/seed003/logs
python3 -m envmatrix bisect 'probe.forbid_transport=[NET]' --grid 1x4 --env-file benchmarks/h200_bisect/interaction.sh \
  --out $OUT/interaction --json $OUT/interaction/bisect.json | grep -E "^\[|error|report"
rm -rf $OUT/interaction/logs
