#!/usr/bin/env bash
# Issue 36 on a box with 2+ GPUs (~5 min on 2 GPUs; run it with timeout 590): seed 004's GPU pair matrix and seed
# 002's rail vs cross all-to-all, with the code of issue 34.
#   1. `envmatrix bench --pairs gpus` on every GPU of the box, under the default env (setup baseline) and under
#      NCCL_P2P_DISABLE=1 (setup no_p2p), both from conf/default.yaml: uni- and bidirectional bandwidth at PAIR_SIZE,
#      latency at LAT_SIZE, each pair's NCCL transport (from NCCL's log) and `nvidia-smi topo -m` link, and the
#      ratio no_p2p / baseline per pair (P2P vs SHM).
#   2. `envmatrix bench --peers rail,cross` all-to-all, 8K-4M, on the largest grid the box allows: 2x2 on 4+ GPUs,
#      2x2 on emulated hosts sharing 2 GPUs where `--emulate-hosts` exists (its bandwidth is not representative:
#      two ranks share a GPU), else 2x1 (one rank per node: rail and cross are the same peers, a control) and
#      1x2 with --peers all.
# Every process has NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 (box_env.sh and
# here; env/merge.py pins them on every rank too).
# Outputs in $OUT/pairs_gpu: console.log, topo.txt, nvidia-smi.txt, each run directory (Markdown tables, report.html,
# results.json) and a tarball of them.
# Run from the repo root: OUT=/tmp/x bash benchmarks/pairs_gpu.sh  (PAIR_SIZE, LAT_SIZE, ITERS from the environment)
# CPU rehearsal (gloo; --pairs gpus then says it needs two GPUs, exit 2): REHEARSAL=1 OUT=/tmp/x bash benchmarks/pairs_gpu.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: "${OUT:?set OUT to the output directory}"
if [ "${REHEARSAL:-0}" = 1 ]; then
  export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-$PWD}
  BACKEND=gloo PAIR_SIZE=${PAIR_SIZE:-1M} LAT_SIZE=${LAT_SIZE:-8} ITERS=${ITERS:-3} MAXB=256K
else
  source benchmarks/box_env.sh
  BACKEND=nccl PAIR_SIZE=${PAIR_SIZE:-256M} LAT_SIZE=${LAT_SIZE:-8} ITERS=${ITERS:-20} MAXB=4M
fi
W="$OUT/pairs_gpu"
mkdir -p "$W"
EM=(python3 -m envmatrix)
log() { echo "== $*" | tee -a "$W/console.log"; }
run() { log "$*"; "$@" 2>&1 | tee -a "$W/console.log"; echo "exit ${PIPESTATUS[0]}" | tee -a "$W/console.log"; }

nvidia-smi topo -m > "$W/topo.txt" 2>&1 || echo "no nvidia-smi" > "$W/topo.txt"
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv > "$W/nvidia-smi.txt" 2>&1 || true
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else None)' \
  >> "$W/nvidia-smi.txt" 2>&1 || true
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
log "GPUs: ${GPUS:-0}; $(tr '\n' ' ' < "$W/nvidia-smi.txt")"

# 1. the GPU pair matrices, default env and P2P off, with their ratio
run "${EM[@]}" bench "backend=$BACKEND" --pairs gpus --setup baseline,no_p2p --pair-size "$PAIR_SIZE" \
    --latency-size "$LAT_SIZE" -n "$ITERS" -w 2 --out "$W/gpus"

# 2. rail vs cross all-to-all, seed 002's sizes
PEERS=(--peers rail,cross -b 8K -e "$MAXB" -n "$ITERS" -w 2)
if [ "${GPUS:-0}" -ge 4 ]; then
  run "${EM[@]}" bench "backend=$BACKEND" --grid 2x2 "${PEERS[@]}" --out "$W/peers_2x2"
elif "${EM[@]}" bench --help 2>/dev/null | grep -q -- '--emulate-hosts'; then
  run "${EM[@]}" bench "backend=$BACKEND" --grid 2x2 --emulate-hosts "${PEERS[@]}" --out "$W/peers_2x2_emulated"
else
  run "${EM[@]}" bench "backend=$BACKEND" --grid 2x1 "${PEERS[@]}" --out "$W/peers_2x1"
  run "${EM[@]}" bench "backend=$BACKEND" --grid 1x2 --peers all -b 8K -e "$MAXB" -n "$ITERS" -w 2 --out "$W/peers_1x2"
fi
# 3. the same two through the mpirun launcher (one host: mpirun's emulated nodes, the shim's per-node NCCL_HOSTID)
if [ "${MPIRUN:-1}" = 1 ] && command -v mpirun >/dev/null 2>&1; then
  run "${EM[@]}" bench "backend=$BACKEND" launcher=mpirun --pairs gpus --setup baseline --pair-size "$PAIR_SIZE" \
      --latency-size "$LAT_SIZE" -n "$ITERS" -w 2 --out "$W/gpus_mpirun"
  run "${EM[@]}" bench "backend=$BACKEND" launcher=mpirun --grid 2x1 "${PEERS[@]}" --out "$W/peers_2x1_mpirun"
fi
tar -C "$W" -czf "$OUT/pairs_gpu.tgz" . 2>/dev/null || true
log "done: $W"
