#!/usr/bin/env bash
# Issue 16 diagnosis on the 2xH200 box (~60 s, carry .whl and .nt): bench/graph_window_diag.py, one process per GPU,
# beside nccl-tests' all_reduce_perf (MPI=1 build, -g 1, default and -G 1) on the same sizes in the same call.
# Outputs: $OUT/graph_window.jsonl (one line per size, variant and repeat: skew, window and device us per op per rank),
# $OUT/nt_default.txt, $OUT/nt_graph.txt, $OUT/summary.txt.
set -uo pipefail
source bench/box_env.sh
SRC=${SRC:-$PWD/.nt/nccl-tests}
nccl_home=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])") || exit 2
NTM=$SRC/build_mpi
if [ -z "${SKIP_NT:-}" ]; then  # SKIP_NT=1: only the envmatrix side
[ -x "$NTM/all_reduce_perf" ] || ( cd "$SRC/src" && timeout 300 make -j8 MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi \
  BUILDDIR="$NTM" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" CUDA_HOME=/usr/local/cuda \
  BIN_FILES_LIST="all_reduce" build ) >"$OUT/build.log" 2>&1
for mode in default graph; do
  flag=(); [ $mode = graph ] && flag=(-G 1)
  LD_LIBRARY_PATH=$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 60 mpirun --allow-run-as-root --oversubscribe \
    --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS \
    "$NTM/all_reduce_perf" -g 1 -b 8 -e 256K -f 8 -n 20 -w 5 "${flag[@]}" >"$OUT/nt_$mode.txt" 2>&1
done
fi
timeout 150 python3 -m torch.distributed.run --nproc-per-node 2 bench/graph_window_diag.py >"$OUT/graph_window.jsonl" 2>"$OUT/graph_window.err"
{
python3 - "$OUT/graph_window.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and "\"size\"" in l]
print([l.strip() for l in open(sys.argv[1]) if "cudart" in l])
for size in sorted({r["size"] for r in rows}):
    for v in ("as_is", "warm", "warm_gloo", "raw_graph", "torch_graph_global", "own_comm", "host_torch_comm", "host_own_comm"):
        sel = [r for r in rows if r["size"] == size and r["variant"] == v]
        if not sel:
            continue
        med = lambda xs: round(statistics.median(xs), 2)
        print(f"{size:>7} {v:<18} skew {med([r['skew_us(r1-r0)'] for r in sel]):>8} us  window r0/r1 "
              f"{med([r['window_us'][0] for r in sel])}/{med([r['window_us'][1] for r in sel])}  mean "
              f"{med([sum(r['window_us'])/2 for r in sel])}  device r0/r1 {med([r['device_us'][0] for r in sel])}/{med([r['device_us'][1] for r in sel])}")
PY
[ -n "${SKIP_NT:-}" ] || for mode in default graph; do echo "nccl-tests $mode:"; grep -E "^ +[0-9]+ +[0-9]+ +float" "$OUT/nt_$mode.txt"; done
tail -3 "$OUT/graph_window.err"
} | tee "$OUT/summary.txt"
