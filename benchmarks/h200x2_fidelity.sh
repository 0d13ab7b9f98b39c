#!/usr/bin/env bash
# Issue 16: envmatrix bench vs nccl-tests on 1x2 H200, same NCCL library, interleaved repeats, one device call.
# Usage (repo root on the box, carry .whl and prebuilt nccl-tests 2.19.6 binaries, never committed: NT_MPI_DIR holds
# the MPI=1 build, NT_G2_DIR the MPI=0 build; a layout whose binaries are absent is skipped, said in the log):
#   bash benchmarks/h200x2_fidelity.sh            AR/AG/RS/A2A/bcast, 8 B - 1 GiB -f 8, 2 repeats (REPEATS=N: N)  (~2.5 min + 1 min per repeat)
#   QUICK=1 bash benchmarks/h200x2_fidelity.sh    allreduce 8 B - 64 MiB, 1 repeat (< 2 min)
#   GPUS=1 ...                               grid 1x1 on a one-GPU box: nccl-tests `-g 1` (MPI=1 build under
#                                            `mpirun -np 1`; the MPI=0 layout is the same process, not built)
#   OLD=DIR ...                              also times `--timing host` with the envmatrix package in DIR (e.g. an
#                                            earlier commit's tree, carried): interleaved, as em_oldhost_r*;
#                                            OLD_TIMINGS="host graph" times both modes with it (em_oldgraph_r*)
#   SMALL_REPEATS=N ...                      then N more interleaved repeats of 8 B - 256 KiB only, named r101..: the
#                                            small host cells need many processes per side (fidelity_h100x2.md)
#   REPEATS=0 SMALL_REPEATS=N ...            only those (a second call; tables pool every repeat of both calls)
#   COLLS=a,b HOST_ONLY=1 ...                those collectives only (each envmatrix process times just them, in that
#                                            order), default/host timing only
#   BINDS="none core" ...                     each repeat runs both tools once per CPU binding (issue 40: is the per-process
#                                            spread where each rank's threads land?): none = today's `--bind-to none`
#                                            (envmatrix's local launcher), core = both tools under mpirun with
#                                            OpenMPI's `--bind-to core` (rank i on core i); raw names get `-core`
#   G2=0 ...                                 skips the single-process `-g 2` reference (its runs, about a third
#                                            of the call) when device time is short
# The fair reference is one process per GPU, as envmatrix runs: nccl-tests built with MPI=1 and run as
# `mpirun -np 2 ... -g 1` (default and -G 1). The single-process `-g 2` build (MPI=0) is measured beside it,
# default timing only, to show how much the reference itself moves with the process layout.
# Every part writes its own files under $OUT as it goes, so a failed part leaves the others' outputs:
#   $OUT/fidelity_table.md, $OUT/fidelity_log.txt, $OUT/raw.tgz (stdout files + stores).
set -uo pipefail
source benchmarks/box_env.sh
OUT=${OUT:-/tmp/fidelity_out}
SRC=${SRC:-$PWD/.nt/nccl-tests}  # default home of the two prebuilt dirs below
raw=$OUT/raw
log=$OUT/fidelity_log.txt
mkdir -p "$raw"
t_start=$(date +%s)
# nccl-tests must load the very libnccl torch loads (the nvidia-nccl wheel), not the system one
nccl_home=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])") \
  || { echo "no nvidia-nccl wheel beside torch: cannot pin nccl-tests to torch's libnccl" | tee -a "$log"; exit 2; }
export LD_LIBRARY_PATH=$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

if [ "${QUICK:-0}" = 1 ]; then
  colls=(allreduce) max=64M repeats=1
else
  colls=(allreduce allgather reduce_scatter alltoall broadcast) max=1G repeats=${REPEATS:-2}
  [ -n "${COLLS:-}" ] && IFS=, read -r -a colls <<<"$COLLS"
fi
declare -A binary=([allreduce]=all_reduce_perf [allgather]=all_gather_perf [reduce_scatter]=reduce_scatter_perf
                   [alltoall]=alltoall_perf [broadcast]=broadcast_perf)
clist=$(IFS=,; echo "${colls[*]}")
gpus=${GPUS:-2}
grid=1x$gpus
sweep=(-b 8 -e "$max" -f 8 -n 20 -w 5)
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())))"
  echo "libnccl: $nccl_home/lib"; mpirun --version 2>&1 | head -1; env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
} >>"$log" 2>&1

# nccl-tests is never built by this repo's scripts (policy): 2.19.6 is built by hand on the box with MPI=1 (and MPI=0
# for the single-process -g 2 layout), and the two binary dirs are named here
NT1=${NT_G2_DIR:-$SRC/build_g2} NTM=${NT_MPI_DIR:-$SRC/build_mpi}
have_g2=1 have_mpi=1
for c in "${colls[@]}"; do
  [ -x "$NT1/${binary[$c]}" ] && [ "$gpus" != 1 ] && [ "${G2:-1}" != 0 ] || have_g2=0
  [ -x "$NTM/${binary[$c]}" ] || have_mpi=0
done
[ $have_mpi = 1 ] || echo "no MPI=1 binaries: the mpirun -g 1 reference is skipped" >>"$log"
[ $have_g2 = 1 ] || echo "no MPI=0 binaries: the -g 2 reference is skipped" >>"$log"

# every rank process gets the NVLS pins and torch's libnccl explicitly (mpirun forwards only what -x names reliably)
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$gpus"
     -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS)
nccl_tests() {  # layout(mpi|g2) mode repeat extra-flags...
  local layout=$1 mode=$2 r=$3; shift 3
  local mpi=("${mpi[@]}")
  [ "$bind" = none ] || { mpi=("${mpi[@]/none/$bind}"); mode=$mode-$bind; }
  [ "$layout" = mpi ] && [ $have_mpi = 0 ] && return
  [ "$layout" = g2 ] && { [ $have_g2 = 0 ] || [ "$bind" != none ]; } && return  # one process: nothing to bind
  for c in "${colls[@]}"; do
    local f="$raw/nt_${layout}-${mode}_r${r}_${binary[$c]}.txt"
    if [ "$layout" = mpi ]; then
      timeout 120 "${mpi[@]}" "$NTM/${binary[$c]}" -g 1 "${sweep[@]}" "$@" >"$f" 2>&1
    else
      timeout 120 "$NT1/${binary[$c]}" -g "$gpus" "${sweep[@]}" "$@" >"$f" 2>&1
    fi || echo "nccl-tests $layout $c $mode r$r failed rc=$?" >>"$log"
  done
}
envmatrix_bench() {  # timing repeat [package-dir label]
  local label=${4:-}$1 launch=()
  [ "$bind" = none ] || { label=$label-$bind; launch=(launcher=mpirun "launcher_opts.mpirun.extra_args=[--bind-to,$bind]"); }
  # from inside the package's tree: `python3 -m` puts the working directory first on sys.path
  (cd "${3:-$PWD}" && PYTHONPATH=/tmp/site:${3:-$PWD} timeout 200 python3 -m envmatrix bench --grid "$grid" "${sweep[@]}" -c "$clist" \
    --timing "$1" --timeout 180 --out "$raw/em_${label}_r$2" "${launch[@]}") >>"$log" 2>&1 || echo "envmatrix $label r$2 rc=$?" >>"$log"
}
old_timings=(${OLD_TIMINGS:-host})
old_arm() { [ -n "${OLD:-}" ] && [ "$bind" = none ] || return 0; for t in "${old_timings[@]}"; do envmatrix_bench "$t" "$1" "$OLD" old; done; }

tables() {  # rewritten after every repeat: a later failure or timeout keeps what was measured so far
  {
    echo "# envmatrix vs nccl-tests, $grid $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) ($(date -u +%F), repeats done: $1 of $repeats, colls: $clist, 8 B - $max)"
    echo
    echo "nccl-tests: \`mpirun -np $gpus ${binary[allreduce]} -g 1 ${sweep[*]}\` (and \`-G 1\`; MPI=1 build), \`${binary[allreduce]} -g $gpus ${sweep[*]}\` (MPI=0 build);"
    echo "envmatrix: \`envmatrix bench --grid $grid ${sweep[*]} -c $clist --timing host|graph\`"
    echo
    python3 benchmarks/fidelity_table.py "$grid" "$raw/em_host_r*" "$raw/nt_mpi-default_r*_*.txt" "host vs mpirun -g 1 default"
    echo
    python3 benchmarks/fidelity_table.py "$grid" "$raw/em_graph_r*" "$raw/nt_mpi-graph_r*_*.txt" "graph vs mpirun -g 1 -G 1"
    if [ -n "${OLD:-}" ]; then
      for t in "${old_timings[@]}"; do
        echo
        if [ "$t" = graph ]; then nt=graph flags=" -G 1"; else nt=default flags=" default"; fi
        python3 benchmarks/fidelity_table.py "$grid" "$raw/em_old${t}_r*" "$raw/nt_mpi-${nt}_r*_*.txt" "$t of $OLD vs mpirun -g 1$flags"
      done
    fi
    for b in "${binds[@]}"; do
      [ "$b" = none ] && continue
      echo
      python3 benchmarks/fidelity_table.py "$grid" "$raw/em_host-${b}_r*" "$raw/nt_mpi-default-${b}_r*_*.txt" "host vs mpirun -g 1 default, both --bind-to $b"
      [ "${HOST_ONLY:-0}" = 1 ] && continue
      echo
      python3 benchmarks/fidelity_table.py "$grid" "$raw/em_graph-${b}_r*" "$raw/nt_mpi-graph-${b}_r*_*.txt" "graph vs mpirun -g 1 -G 1, both --bind-to $b"
    done
    if [ "$have_g2" = 1 ]; then
      echo
      python3 benchmarks/fidelity_table.py "$grid" "$raw/em_host_r*" "$raw/nt_g2-default_r*_*.txt" "host vs single-process -g $gpus default"
      echo
      python3 benchmarks/fidelity_table.py "$grid" "$raw/nt_g2-default_r*_*.txt" "$raw/nt_mpi-default_r*_*.txt" "nccl-tests -g $gpus vs mpirun -g 1 (reference vs reference)"
    fi
  } >"$OUT/fidelity_table.md" 2>>"$log"
}

# interleaved: each repeat runs every side once, alternating who goes first; the small repeats after the full ones
small_repeats=${SMALL_REPEATS:-0}
binds=(${BINDS:-none})
bind=none
repeat_once() {  # one side each, alternating who goes first; graph (when on) beside host
  if [ $((r % 2)) = 1 ]; then
    nccl_tests mpi default "$r"; envmatrix_bench host "$r"; old_arm "$r"; nccl_tests g2 default "$r"
    [ "${HOST_ONLY:-0}" = 1 ] || { nccl_tests mpi graph "$r" -G 1; envmatrix_bench graph "$r"; }
  else
    [ "${HOST_ONLY:-0}" = 1 ] || { envmatrix_bench graph "$r"; nccl_tests mpi graph "$r" -G 1; }
    nccl_tests g2 default "$r"; old_arm "$r"; envmatrix_bench host "$r"; nccl_tests mpi default "$r"
  fi
}
for r in $(seq 1 "$repeats") $(seq 101 $((100 + small_repeats))); do
  [ "$r" -gt 100 ] && sweep=(-b 8 -e 256K -f 8 -n 20 -w 5)
  echo "== repeat $r $(date -u +%T)" >>"$log"
  for bind in "${binds[@]}"; do repeat_once; done
  bind=none
  tables "$r"
  tar -czf "$OUT/raw.tgz" -C "$OUT" raw 2>>"$log"  # the device tool returns few files: one archive, refreshed per repeat
done
rm -rf "$raw"
echo "== done $(date -u +%T), $(( $(date +%s) - t_start )) s in all" >>"$log"
grep -h -E "^(host|graph|nccl-tests).*: ([0-9]+ pass|each repeat)" "$OUT/fidelity_table.md"
grep -E "failed|rc=|skipped" "$log"
exit 0
