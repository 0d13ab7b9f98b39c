#!/usr/bin/env bash
# envmatrix side of the busbw fidelity comparison on the 4xH200 box (issue 3).
# Usage: benchmarks/fidelity_envmatrix.sh GRID OUTDIR [extra envmatrix bench flags]
# allreduce/allgather/alltoall at 64M, 256M, 1G, 20 iterations after 5 warmups (nccl-tests' defaults).
# nccl-tests is run beside it from its public source (not part of this repo).
set -uo pipefail
source benchmarks/box_env.sh
grid=$1 out=$2
shift 2
python3 -m envmatrix bench --grid "$grid" -b 64M -e 1G -f 4 -n 20 -w 5 \
  -c allreduce,allgather,alltoall --timeout 580 --out "$out" "$@" | grep -E "^\[|error"
