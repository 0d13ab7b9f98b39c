#!/usr/bin/env bash
# Issue 16: envmatrix bench vs nccl-tests on 1x2 H200, same NCCL library, interleaved repeats.
# Usage (repo root on the box, nccl-tests already built in ./.nt/nccl-tests/build against torch's NCCL):
#   bash bench/h200x2_fidelity.sh            full: AR/AG/RS/A2A/bcast, 8 B - 1 GiB -f 8, 2 repeats, both modes
#   QUICK=1 bash bench/h200x2_fidelity.sh    first check: allreduce 8 B - 64 MiB, both modes, 1 repeat (< 2 min)
# Modes compared: nccl-tests default vs envmatrix --timing host; nccl-tests -G 1 vs envmatrix --timing graph;
# once, nccl-tests default vs --timing host-torch (launches through torch.distributed instead of straight into libnccl).
# Outputs under $OUT: fidelity_table.md, fidelity_log.txt, fidelity_raw.tar.gz (stdout files + result stores).
set -uo pipefail
source bench/box_env.sh
OUT=${OUT:-/tmp/fidelity_out}
NT=${NT:-./.nt/nccl-tests/build}
work=$(mktemp -d /tmp/fid.XXXXXX)
log=$OUT/fidelity_log.txt
mkdir -p "$OUT"
# nccl-tests must load the very libnccl torch loads (the nvidia-nccl wheel), not the system one
nccl_home=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])") \
  || { echo "no nvidia-nccl wheel beside torch: cannot pin nccl-tests to torch's libnccl" | tee -a "$log"; exit 2; }
export LD_LIBRARY_PATH=$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

if [ "${QUICK:-0}" = 1 ]; then
  colls=(allreduce) max=64M repeats=1
else
  colls=(allreduce allgather reduce_scatter alltoall broadcast) max=1G repeats=2
fi
declare -A binary=([allreduce]=all_reduce_perf [allgather]=all_gather_perf [reduce_scatter]=reduce_scatter_perf
                   [alltoall]=alltoall_perf [broadcast]=broadcast_perf)
for c in "${colls[@]}"; do
  [ -x "$NT/${binary[$c]}" ] || { echo "missing $NT/${binary[$c]}: build nccl-tests first" | tee -a "$log"; exit 2; }
done
clist=$(IFS=,; echo "${colls[*]}")
sweep=(-b 8 -e "$max" -f 8 -n 20 -w 5)
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())))"
  echo "libnccl: $nccl_home/lib"; env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
} >>"$log" 2>&1

nccl_tests() {  # mode repeat extra-flags...
  local mode=$1 r=$2; shift 2
  for c in "${colls[@]}"; do
    timeout 300 "$NT/${binary[$c]}" -g 2 "${sweep[@]}" "$@" >"$work/nt_${mode}_r${r}_${binary[$c]}.txt" 2>&1 \
      || echo "nccl-tests $c $mode r$r failed rc=$?" >>"$log"
  done
}
envmatrix_bench() {  # timing repeat
  timeout 400 python3 -m envmatrix bench --grid 1x2 "${sweep[@]}" -c "$clist" --timing "$1" --timeout 380 \
    --out "$work/em_$1_r$2" >>"$log" 2>&1 || echo "envmatrix $1 r$2 rc=$?" >>"$log"
}

# interleaved: each repeat runs every side once, alternating who goes first
for r in $(seq 1 "$repeats"); do
  echo "== repeat $r $(date -u +%T)" >>"$log"
  if [ $((r % 2)) = 1 ]; then
    nccl_tests default "$r"; envmatrix_bench host "$r"; nccl_tests graph "$r" -G 1; envmatrix_bench graph "$r"
    # torch.distributed's own call path in the same window, once: what the direct launches remove
    [ "${QUICK:-0}" = 1 ] || envmatrix_bench host-torch "$r"
  else
    envmatrix_bench graph "$r"; nccl_tests graph "$r" -G 1; envmatrix_bench host "$r"; nccl_tests default "$r"
  fi
done

{
  echo "# envmatrix vs nccl-tests, 1x2 H200 ($(date -u +%F), ${repeats} repeat(s), colls: $clist, 8 B - $max)"
  echo
  echo "nccl-tests: \`${binary[allreduce]} -g 2 ${sweep[*]}\` (and \`-G 1\`); envmatrix: \`envmatrix bench --grid 1x2 ${sweep[*]} -c $clist --timing host|graph\`"
  echo
  python3 bench/fidelity_table.py 1x2 "$work/em_host_r*" "$work/nt_default_r*_*.txt" "host vs default"
  echo
  python3 bench/fidelity_table.py 1x2 "$work/em_graph_r*" "$work/nt_graph_r*_*.txt" "graph vs -G 1"
  echo
  [ -d "$work/em_host-torch_r1" ] && python3 bench/fidelity_table.py 1x2 "$work/em_host-torch_r1" "$work/nt_default_r1_*.txt" "host-torch (torch.distributed call path) vs default, repeat 1"
} >"$OUT/fidelity_table.md" 2>>"$log"
tar -czf "$OUT/fidelity_raw.tar.gz" -C "$work" . 2>>"$log"
echo "== done $(date -u +%T)" >>"$log"
tail -n 40 "$OUT/fidelity_table.md"
grep -E "pass, .* miss|failed|rc=" "$OUT/fidelity_table.md" "$log"
