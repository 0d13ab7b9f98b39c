#!/usr/bin/env bash
# Issue 6 and seed 000 on the 4xH200 box:
#  - the transport matrix through the box's OpenMPI mpirun (NCCL, 1x4 and emulated 2x2), env delivery checked per rank;
#  - gloo (CPU tensors) beside NCCL (GPU) for p2p and allreduce on an emulated 2x1, as seed 000 compares them.
# Outputs land in $OUT/h200_mpirun and $OUT/h200_backends.
set -uo pipefail
source benchmarks/box_env.sh
mpirun --version | head -1
python3 -m envmatrix sweep conf=h200_transports launcher=mpirun 'grids=[1x4,2x2]' probe.nccl_debug=INFO --out "$OUT/h200_mpirun"
python3 -m envmatrix bench --backends gloo,nccl --grid 2x1 -c p2p,allreduce -b 1K -e 256M -f 4 -n 20 -w 5 \
  --out "$OUT/h200_backends"
tar -C "$OUT" -czf "$OUT/mpirun_logs.tar.gz" h200_mpirun/logs h200_backends/logs 2>/dev/null
rm -rf "$OUT"/h200_mpirun/logs "$OUT"/h200_backends/logs
