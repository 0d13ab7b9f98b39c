#!/usr/bin/env bash
# Issue 40: how far apart separately started processes put the same small allreduce at 1x2, envmatrix side (and
# nccl-tests beside it when a prebuilt MPI=1 build is given; this repo never builds nccl-tests).
# Usage (repo root on a 2-GPU box, carry .whl):
#   bash benchmarks/h100x2_process_spread.sh              ROUNDS=3 fresh `envmatrix bench --grid 1x2` runs of
#                                                         allreduce,allgather 8 B - 256 MiB (-f 8 -n 20 -w 5, host)
#   NT_MPI_DIR=DIR bash benchmarks/h100x2_process_spread.sh   + per round, nccl-tests from DIR (all_reduce_perf,
#       all_gather_perf; `mpirun -np 2 ... -g 1`, same sweep): allreduce right after envmatrix, allreduce again,
#       allgather, then 4 s idle and allreduce once more (does what ran just before move nccl-tests' number?)
# Prints per-process means at 64 B - 32 KiB (benchmarks/process_spread.py); everything under $OUT.
set -uo pipefail
source benchmarks/box_env.sh
OUT=${OUT:-/tmp/process_spread}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
sweep=(-b 8 -e 256M -f 8 -n 20 -w 5)
nccl_home=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])") || exit 2
export LD_LIBRARY_PATH=$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2
     -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS)
nt() {  # label binary round
  [ -n "${NT_MPI_DIR:-}" ] || return 0
  timeout 90 "${mpi[@]}" "$NT_MPI_DIR/$2_perf" -g 1 "${sweep[@]}" >"$OUT/nt_$1_r$3_$2_perf.txt" 2>&1 \
    || echo "nccl-tests $1 r$3 rc=$?"
}
for r in $(seq 1 "$ROUNDS"); do
  timeout 150 python3 -m envmatrix bench --grid 1x2 -c allreduce,allgather --timing host --timeout 140 \
    --out "$OUT/em_r$r" "${sweep[@]}" >>"$OUT/envmatrix_console.txt" 2>&1 || echo "envmatrix r$r rc=$?"
  nt arafterem all_reduce "$r"; nt arsecond all_reduce "$r"; nt ag all_gather "$r"
  [ -z "${NT_MPI_DIR:-}" ] || sleep 4
  nt arafteridle all_reduce "$r"
done
python3 benchmarks/process_spread.py allreduce "$OUT/em_r*" "$OUT/nt_ar*_all_reduce_perf.txt"
python3 benchmarks/process_spread.py allgather "$OUT/em_r*" "$OUT/nt_ag_*_all_gather_perf.txt"
