#!/usr/bin/env bash
# Issue 40: where envmatrix's graph window (--timing graph) spends 0.5-1 us per operation more than nccl-tests -G 1
# at small allreduce / reduce_scatter on 1x2 (benchmarks/fidelity_h100x2.md). Same library, same sizes, each side
# under the NCCL variables that change what a captured collective holds: default, NCCL_GRAPH_MIXING_SUPPORT=0 (no
# cross-graph serialisation nodes), NCCL_GRAPH_REGISTER=0 (no user-buffer registration in capture). envmatrix rows
# record the captured graph's nodes by type (graph_nodes), so a graph that is not n kernels shows.
# Usage (repo root on a 2-GPU box, carry .whl; NT_MPI_DIR holds a prebuilt MPI=1 nccl-tests, never built by this repo):
#   NT_MPI_DIR=DIR ROUNDS=2 bash benchmarks/h100x2_graph_excess.sh      -> $OUT/graph_excess.md, $OUT/graph_excess.tgz
set -uo pipefail
source benchmarks/box_env.sh
OUT=${OUT:-/tmp/graph_excess}
ROUNDS=${ROUNDS:-2}
raw=$OUT/graph_raw
mkdir -p "$raw"
nccl_home=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])") || exit 2
export LD_LIBRARY_PATH=$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
sweep=(-b 8 -e 4K -f 8 -n 20 -w 5)
declare -A variant=([default]="" [nomixing]=NCCL_GRAPH_MIXING_SUPPORT=0 [noregister]=NCCL_GRAPH_REGISTER=0)
for r in $(seq 1 "$ROUNDS"); do
  for v in default nomixing noregister; do
    kv=${variant[$v]}
    em_env=(); nt_env=()
    if [ -n "$kv" ]; then em_env=(--env "$kv"); nt_env=(-x "$kv"); export "${kv?}"; fi
    for bin in all_reduce reduce_scatter; do
      timeout 60 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH \
        -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS "${nt_env[@]}" \
        "$NT_MPI_DIR/${bin}_perf" -g 1 "${sweep[@]}" -G 1 >"$raw/nt_${v}_r${r}_${bin}_perf.txt" 2>&1 \
        || echo "nccl-tests $v $bin r$r rc=$?"
    done
    [ -n "$kv" ] && unset "${kv%%=*}"
    timeout 120 python3 -m envmatrix bench --grid 1x2 "${sweep[@]}" -c allreduce,reduce_scatter --timing graph \
      --allow-unknown-vars "${em_env[@]}" --timeout 100 --out "$raw/em_${v}_r${r}" >>"$OUT/console.txt" 2>&1 \
      || echo "envmatrix $v r$r rc=$?"
  done
done
{
  echo "# graph window, envmatrix / nccl-tests -G 1, by NCCL variant ($ROUNDS rounds; $(date -u +%F))"
  for v in default nomixing noregister; do
    echo
    python3 benchmarks/fidelity_table.py 1x2 "$raw/em_${v}_r*" "$raw/nt_${v}_r*_*.txt" "graph, $v"
  done
  echo
  echo "graph nodes per envmatrix row (collective size nodes):"
  for d in "$raw"/em_default_r1 "$raw"/em_nomixing_r1 "$raw"/em_noregister_r1; do
    python3 - "$d" <<'EOF'
import json, sqlite3, sys
for (row_json,) in sqlite3.connect(sys.argv[1] + "/results.sqlite").execute("SELECT row_json FROM metrics"):
    row = json.loads(row_json)
    print(sys.argv[1].rsplit("/", 1)[-1], row.get("collective"), row.get("size_bytes"), row.get("graph_nodes"))
EOF
  done
} >"$OUT/graph_excess.md" 2>&1
tar -czf "$OUT/graph_excess.tgz" -C "$OUT" graph_raw console.txt 2>/dev/null
rm -rf "$raw"
cat "$OUT/graph_excess.md"
