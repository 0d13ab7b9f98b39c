#!/usr/bin/env bash
# Issue 16 diagnosis (one GPU, ~3 min, carry .whl and .nt): is envmatrix's small-size excess over nccl-tests -G 1
# (about 0.1-0.3 us per operation on some H100s, bench/fidelity_h200.md) a constant per window (the graph's first
# launch, its upload, the drain) or a cost per captured operation? Both tools, graph and default timing, allreduce
# and broadcast 8 B - 256 KiB, -n 20 and -n 80, REPEATS interleaved processes; a per-window constant shrinks 4x per
# operation from -n 20 to -n 80, a per-operation cost does not.
# Outputs: $OUT/scaling.md (medians per arm), $OUT/raw.tgz.
set -uo pipefail
source bench/box_env.sh
SRC=${SRC:-$PWD/.nt/nccl-tests}
NTM=$SRC/build_mpi
nccl_home=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])") || exit 2
export LD_LIBRARY_PATH=$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -x "$NTM/all_reduce_perf" ] && [ -x "$NTM/broadcast_perf" ] || ( cd "$SRC/src" && timeout 300 make -j8 MPI=1 \
  MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi BUILDDIR="$NTM" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
  CUDA_HOME=/usr/local/cuda BIN_FILES_LIST="all_reduce broadcast" build ) >"$OUT/build.log" 2>&1
raw=$OUT/raw; mkdir -p "$raw"
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 1
     -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS)
for r in $(seq 1 "${REPEATS:-4}"); do
  for n in 20 80; do
    for mode in graph host; do
      flag=(); [ $mode = graph ] && flag=(-G 1)
      for b in all_reduce_perf broadcast_perf; do
        timeout 60 "${mpi[@]}" "$NTM/$b" -g 1 -b 8 -e 256K -f 8 -n $n -w 5 "${flag[@]}" >"$raw/nt_${mode}_n${n}_r${r}_$b.txt" 2>&1
      done
      timeout 120 python3 -m envmatrix bench --grid 1x1 -b 8 -e 256K -f 8 -n $n -w 5 -c allreduce,broadcast \
        --timing $mode --timeout 100 --out "$raw/em_${mode}_n${n}_r${r}" >>"$OUT/em.log" 2>&1
    done
  done
done
for mode in graph host; do for n in 20 80; do
  python3 bench/fidelity_table.py 1x1 "$raw/em_${mode}_n${n}_r*" "$raw/nt_${mode}_n${n}_r*_*.txt" "$mode -n $n"
  echo
done; done >"$OUT/scaling.md" 2>>"$OUT/em.log"
tar -czf "$OUT/raw.tgz" -C "$OUT" raw && rm -rf "$raw"  # the device tool returns few files
grep -E "pass|each repeat" "$OUT/scaling.md"
