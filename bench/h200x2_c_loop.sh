#!/usr/bin/env bash
# Issue 16 prototype on the 2xH200 box (~90 s, carry .whl and .nt): envmatrix's host window against the same window
# with the launches made by a C loop inside the rank (bench/c_loop_diag.py), beside nccl-tests' default timing
# (MPI=1 build, mpirun -np 2 -g 1) before and after, AR/AG/RS/A2A/bcast 8 B - 256 KiB.
# Outputs: $OUT/c_loop.jsonl, $OUT/nt_{before,after}_<binary>.txt, $OUT/summary.txt (rank-mean us per op, ratios).
set -uo pipefail
source bench/box_env.sh
SRC=${SRC:-$PWD/.nt/nccl-tests}
NTM=$SRC/build_mpi
nccl_home=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])") || exit 2
bins="all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf broadcast_perf"
have=1; for b in $bins; do [ -x "$NTM/$b" ] || have=0; done
[ $have = 1 ] || ( cd "$SRC/src" && timeout 300 make -j8 MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi BUILDDIR="$NTM" \
  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" CUDA_HOME=/usr/local/cuda \
  BIN_FILES_LIST="all_reduce all_gather broadcast reduce_scatter alltoall" build ) >"$OUT/build.log" 2>&1
nccl_tests() {
  for b in $bins; do
    LD_LIBRARY_PATH=$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 60 mpirun --allow-run-as-root --oversubscribe \
      --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS \
      "$NTM/$b" -g 1 -b 8 -e 256K -f 8 -n 20 -w 5 >"$OUT/nt_$1_$b.txt" 2>&1
  done
}
nccl_tests before
timeout 200 python3 -m torch.distributed.run --nproc-per-node 2 bench/c_loop_diag.py >"$OUT/c_loop.jsonl" 2>"$OUT/c_loop.err"
nccl_tests after
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import glob, json, statistics, sys
from envmatrix.parsers.nccl_tests import parse_stdout
out = sys.argv[1]
names = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reduce_scatter", "alltoall": "alltoall", "broadcast": "broadcast"}
ref = {}
for path in glob.glob(f"{out}/nt_*_*.txt"):
    binary = path.split("/")[-1].split("_", 2)[2][:-4]  # nt_<when>_<binary>.txt
    report = parse_stdout(open(path).read(), binary)
    for row in report.rows:
        if not row.in_place:
            ref.setdefault((names.get(report.collective, report.collective), row.size_bytes), []).append(row.time_us)
ours = [json.loads(l) for l in open(f"{out}/c_loop.jsonl") if l.startswith("{")]
band = lambda size: (0.95, 1.05) if size >= 65536 else (0.90, 1.10)
passes = {}
print("| collective | size | nccl-tests us (before/after) | engine host us | ratio | C loop us | ratio |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for key in sorted({(r["collective"], r["size"]) for r in ours}, key=lambda k: (list(names.values()).index(k[0]), k[1])):
    nt = ref.get(key)
    if not nt:
        continue
    med = statistics.median(nt)
    cells = []
    for variant in ("engine_host", "c_loop"):
        r = next(x for x in ours if (x["collective"], x["size"]) == key and x["variant"] == variant)
        ratio = r["us"] / med
        ok = band(key[1])[0] <= ratio <= band(key[1])[1]
        passes[variant] = passes.get(variant, 0) + ok
        cells += [f"{r['us']:.1f}", f"{ratio:.3f} {'pass' if ok else 'MISS'}" + (f" wrong={r['wrong']}" if r["wrong"] else "")]
    print(f"| {key[0]} | {key[1]} | {'/'.join(f'{t:.1f}' for t in nt)} | " + " | ".join(cells) + " |")
print(f"\npasses of {len({(r['collective'], r['size']) for r in ours})}: {passes}")
PY
tail -3 "$OUT/c_loop.err"
