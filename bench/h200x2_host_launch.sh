#!/usr/bin/env bash
# Issue 16 diagnosis on the 2xH200 box (~60 s, carry .whl and .nt; builds nccl-tests' all_reduce_perf
# with MPI=1 when absent, as bench/h200x2_fidelity.sh): host cost per launch, envmatrix (bench/host_launch_diag.py) beside nccl-tests -C 1.
set -uo pipefail
source bench/box_env.sh
source bench/nt_mpi.sh
nt_mpi_build "$OUT/build.log" all_reduce
for r in 1 2; do  # unpinned, as bench/h200x2_fidelity.sh runs it
  LD_LIBRARY_PATH=$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 60 mpirun --allow-run-as-root --oversubscribe \
    --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS \
    "$NTM/all_reduce_perf" -g 1 -b 8 -e 256K -f 8 -n 20 -w 5 -C 1 >"$OUT/nt_cputime_r$r.txt" 2>&1
done
# the same with every rank pinned to one quarter of the CPUs (bench/pin_cpus.sh): a VM may hide which are near the GPUs
for cpus in ${PIN:+0-7 8-15 16-23 24-31 0-31}; do  # PIN=1
  LD_LIBRARY_PATH=$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PIN_CPUS=$cpus timeout 60 mpirun --allow-run-as-root \
    --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x PIN_CPUS -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST \
    -x NVSHMEM_DISABLE_NVLS bash bench/pin_cpus.sh "$NTM/all_reduce_perf" -g 1 -b 8 -e 4K -f 8 -n 20 -w 5 -C 1 \
    >"$OUT/nt_cputime_cpus$cpus.txt" 2>&1
done
{ lscpu | grep -i numa; nvidia-smi topo -m; } >"$OUT/topo.txt" 2>&1
timeout 120 python3 -m torch.distributed.run --nproc-per-node 2 bench/host_launch_diag.py >"$OUT/host_launch.jsonl" 2>"$OUT/host_launch.err"
{ cat "$OUT/host_launch.jsonl"; for f in "$OUT"/nt_cputime_*.txt; do echo "nccl-tests -C 1 (cputime per op, us) $(basename "$f"):"; grep -E "^ +[0-9]+ +[0-9]+ +float" "$f"; done
  cat "$OUT/topo.txt"; tail -3 "$OUT/host_launch.err"; } | tee "$OUT/summary.txt"
