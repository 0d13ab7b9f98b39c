#!/usr/bin/env bash
# Issue 16 prototype on the 2xH200 box (~90 s, carry .whl and .nt): envmatrix's host window against the same window
# with the launches made by a C loop inside the rank (bench/c_loop_diag.py), beside nccl-tests' default timing
# (MPI=1 build, mpirun -np 2 -g 1) before and after, AR/AG/RS/A2A/bcast 8 B - 256 KiB.
# Outputs: $OUT/c_loop.jsonl, $OUT/nt_{before,after}_<binary>.txt, $OUT/summary.txt (rank-mean us per op, ratios).
# DIAG=launch_stream runs bench/launch_stream_diag.py instead (the same, per launch stream), into $OUT/launch_stream.jsonl.
set -uo pipefail
source bench/box_env.sh
source bench/nt_mpi.sh
bins="all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf broadcast_perf"
nt_mpi_build "$OUT/build.log" all_reduce all_gather broadcast reduce_scatter alltoall
nccl_tests() {
  for b in $bins; do
    LD_LIBRARY_PATH=$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 60 mpirun --allow-run-as-root --oversubscribe \
      --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS \
      "$NTM/$b" -g 1 -b 8 -e 256K -f 8 -n 20 -w 5 >"$OUT/nt_$1_$b.txt" 2>&1
  done
}
nccl_tests before
DIAG=${DIAG:-c_loop}
timeout 300 python3 -m torch.distributed.run --nproc-per-node 2 "bench/${DIAG}_diag.py" >"$OUT/$DIAG.jsonl" 2>"$OUT/$DIAG.err"
nccl_tests after
python3 bench/diag_summary.py "$OUT" "$OUT/$DIAG.jsonl" | tee "$OUT/summary.txt"
head -2 "$OUT/$DIAG.jsonl"; tail -3 "$OUT/$DIAG.err"
