#!/usr/bin/env bash
# Issue 16 diagnosis on the 2xH200 box (~3 min, carry .whl and .nt): bench/process_state_diag.py under mpirun in
# three process states (no torch / torch's CUDA context / torch's NCCL process group), interleaved twice, beside
# nccl-tests' all_reduce_perf (MPI=1 build, mpirun -np 2 -g 1; default and -C 1) before, between and after.
# MODES="..." picks the states, ROUNDS=N the interleaved rounds, SIZES=8,4096 and REPEATS=9 pass to the script (bench/process_state_diag.py lists them).
# Outputs (at most 8 files come back): $OUT/process_state.jsonl, $OUT/nt.txt, $OUT/summary.txt, $OUT/err.txt.
set -uo pipefail
source bench/box_env.sh
source bench/nt_mpi.sh
nt_mpi_build "$OUT/err.txt" all_reduce
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x PYTHONPATH -x PYTHONUNBUFFERED
     ${SIZES:+-x SIZES} ${REPEATS:+-x REPEATS} -x PLACEMENT
     -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS)
export LD_LIBRARY_PATH=$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PLACEMENT=
# PLACEMENTS=1: every round runs both sides unbound, each rank on its own physical core, and the two ranks on
# the two hardware threads of one core (bench/pin_cpus.sh), to see whether placement is what moves small sizes.
placements=(none)
if [ "${PLACEMENTS:-0}" = 1 ]; then
  sib=$(cut -d, -f2 /sys/devices/system/cpu/cpu0/topology/thread_siblings_list | cut -d- -f2)
  other=$(for c in /sys/devices/system/cpu/cpu[0-9]*; do n=${c##*cpu}; grep -qE "(^|[,-])$n([,-]|$)" \
    /sys/devices/system/cpu/cpu0/topology/thread_siblings_list || { echo "$n"; break; }; done)
  placements=(none "0;$other")
  [ "$sib" != 0 ] && placements+=("0;$sib")  # a VM may show no hardware-thread pairs
  { lscpu; cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list; } >>"$OUT/err.txt" 2>&1
fi
run_pinned() {  # PLACEMENT $1 ("none" or "LIST0;LIST1"), then the mpirun arguments
  local where=$1; shift
  if [ "$where" = none ]; then timeout 120 "${mpi[@]}" "$@"
  else PIN_RANKS=$where timeout 120 "${mpi[@]}" -x PIN_RANKS bash bench/pin_cpus.sh "$@"; fi
}
nccl_tests() {
  for where in "${placements[@]}"; do
    for flag in "" "-C 1"; do
      echo "== nccl-tests $1 placement=$where ${flag:-default}" >>"$OUT/nt.txt"
      run_pinned "$where" "$NTM/all_reduce_perf" -g 1 -b 8 -e 256K -f 8 -n 20 -w 5 $flag >>"$OUT/nt.txt" 2>>"$OUT/err.txt"
    done
  done
}
port=29600
nccl_tests before
for round in $(seq ${ROUNDS:-2}); do
  for mode in ${MODES:-none torch_cuda torch_pg}; do
    for where in "${placements[@]}"; do
      port=$((port + 1))
      PLACEMENT=$([ "$where" = none ] || echo "@$where") run_pinned "$where" python3 bench/process_state_diag.py \
        "$mode" "$port" >>"$OUT/process_state.jsonl" 2>>"$OUT/err.txt" || echo "mode $mode $where round $round failed: rc $?" | tee -a "$OUT/err.txt"
    done
  done
  nccl_tests "after_round_$round"
done
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, re, statistics, sys
out = sys.argv[1]
nt, section = {}, None
for line in open(f"{out}/nt.txt"):
    if line.startswith("== nccl-tests"):
        where = line.split("placement=")[1].split()[0]
        section = ("cputime" if "-C" in line else "default") + ("" if where == "none" else "@" + where)
        continue
    m = re.match(r"^\s+(\d+)\s+\d+\s+float\s+sum\s+-?\d+\s+([\d.]+)", line)
    if m and section:
        nt.setdefault((section, int(m.group(1))), []).append(float(m.group(2)))
rows = [json.loads(l) for l in open(f"{out}/process_state.jsonl") if l.startswith("{")]
print("nccl-tests out-of-place, us per op (each run): " + "; ".join(
    f"{k[0]} {k[1]} B: {'/'.join(f'{v:.1f}' for v in vs)}" for k, vs in sorted(nt.items()) if k[1] in (8, 4096, 262144)))
print("\n| mode | variant | size | window us (runs) | host us/launch (runs) | window / nccl-tests default median |")
print("| --- | --- | --- | --- | --- | --- |")
keys = list(dict.fromkeys((r["mode"], r["variant"], r["size"]) for r in rows))
for key in sorted(keys, key=lambda k: (k[2], k[0], k[1])):
    rs = [r for r in rows if (r["mode"], r["variant"], r["size"]) == key]
    w = [r["window_us"] for r in rs]
    where = key[0].split("@", 1)[1] if "@" in key[0] else ""
    ref = statistics.median(nt.get(("default" + ("@" + where if where else ""), key[2]), [float("nan")]))
    print(f"| {key[0]} | {key[1]} | {key[2]} | {'/'.join(map(str, w))} | {'/'.join(str(r['host_us']) for r in rs)} | "
          f"{statistics.median(w) / ref:.2f} |")
PY
tail -5 "$OUT/err.txt"
