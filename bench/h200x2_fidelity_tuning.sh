#!/usr/bin/env bash
# Issue 16 diagnosis on the 2xH200 box (~90 s, carry .nt and .whl): why envmatrix's small-message time stays
# ~4.5 us above nccl-tests' even in graph mode, where no host work is in the window. Same library, same layout
# (two processes, one GPU each), allreduce 8 B - 256 KiB, graph mode on both sides, NCCL_DEBUG=INFO with the
# INIT,TUNING subsystems: what each communicator was built with (channels, protocols' thresholds, CC, work FIFO,
# comm config) and which algorithm / protocol / channel range NCCL chose per size.
# Outputs in $OUT: tuning_compare.txt (the lines side by side), nt_info.txt, em_rank0.log, both timing tables.
set -uo pipefail
source bench/box_env.sh
SRC=${SRC:-$PWD/.nt/nccl-tests}
nccl_home=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])") || exit 2
export LD_LIBRARY_PATH=$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NTM=$SRC/build_mpi
[ -x "$NTM/all_reduce_perf" ] || ( cd "$SRC/src" && timeout 300 make -j8 MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi \
  BUILDDIR="$NTM" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" CUDA_HOME=/usr/local/cuda \
  BIN_FILES_LIST="all_reduce" build ) >"$OUT/build.log" 2>&1
sweep=(-b 8 -e 256K -f 8 -n 20 -w 5)
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV
timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
  -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS \
  "$NTM/all_reduce_perf" -g 1 "${sweep[@]}" -G 1 >"$OUT/nt_info.txt" 2>&1
timeout 150 python3 -m envmatrix bench --grid 1x2 "${sweep[@]}" -c allreduce --timing graph --timeout 120 \
  --out /tmp/em_tuning >"$OUT/em_console.txt" 2>&1
cp "$(find /tmp/em_tuning/logs -name rank0.log | head -1)" "$OUT/em_rank0.log"
unset NCCL_DEBUG NCCL_DEBUG_SUBSYS
{
  for side in nt em; do
    f="$OUT/nt_info.txt"; [ $side = em ] && f="$OUT/em_rank0.log"
    echo "===== $side: init and config lines (rank 0 / first process)"
    grep -E "NCCL INFO" "$f" | grep -E "\[0\]" | grep -vE "Bytes -> Algo|Channel [0-9]+/[0-9]+ :|via P2P|Connected|proxy|Proxy" | sed -E 's/^[^ ]+ //' | head -80
    echo "===== $side: per-size choice (rank 0)"
    grep -E "\[0\].*Bytes -> Algo" "$f" | sed -E 's/^.*INFO //' | sort | uniq -c | head -40
  done
  echo "===== timing: nccl-tests"; grep -E "^ +[0-9]+ +[0-9]+ +float" "$OUT/nt_info.txt"
  echo "===== timing: envmatrix"; grep -E "│ +[0-9]+ │" "$OUT/em_console.txt" | head -12
} >"$OUT/tuning_compare.txt" 2>&1
tail -n 120 "$OUT/tuning_compare.txt"
