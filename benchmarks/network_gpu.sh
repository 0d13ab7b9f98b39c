#!/usr/bin/env bash
# Issue 33 on ONE GPU (H100 or H200), target < 8 min: seed 000's and seed 001's tables under network conditions, with
# NCCL over NET/Socket between emulated hosts that share GPU 0. `envmatrix cluster up 8` makes 8 network-namespace
# hosts on a bridge (netlink through the carried pyroute2 wheel: the box has no ip/tc binaries), mpirun reaches them
# through the cluster's agent, and every shaped run's hosts get an htb rate on their eth0 (envmatrix.network).
#   (1) seed 000: p2p 64M/128M on 2x1, gloo and nccl, under default, 5gbit, 1gbit, 200mbit (3 timed, 1 warm-up);
#   (2) seed 001: allreduce, ps_central, ps_sharded at 256 MiB on 4x1 and 8x1, nccl, under default and 5gbit
#       (the network: axis in a config file).
# Box-limited cells (the shared GPU/CPU, not the condition, set the time) and cells under S/R are marked in the tables.
# usage (repo root, on the box, carry [".whl"]): bash benchmarks/network_gpu.sh
#   FULL=1: seed 001's full run instead of (1) and (2): 16 namespace hosts, allreduce/ps_central/ps_sharded at
#       256 MiB and 1 GiB on 4x1, 8x1, 16x1, nccl, default and 5gbit (ITERS=N timed, 1 warm-up; default 1)
#   SMOKE=1 (a CPU host with mpirun, as root): gloo only, small sizes, the same steps; checks the plumbing, not figures
# outputs ($OUT): summary.txt (everything printed), seed000_conditions.{md,csv}, seed001_conditions.{md,csv},
#   seed000_report.html, seed001_report.html, network_gpu_logs.tar.gz
set -uo pipefail
# NVLS pins, carried wheels (pyroute2, hydra, omegaconf, ...) on PYTHONPATH; a SMOKE run uses this host's install
[ "${SMOKE:-0}" = 1 ] || source benchmarks/box_env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # every process, ranks included
export ENVMATRIX_STATE_DIR=/tmp/envmatrix_state
PY=${PY:-python3}
if [ "${SMOKE:-0}" = 1 ]; then
  BACKENDS=gloo; B0=4M; E0=8M; N0=1; SEED001_BACKEND=gloo; S1=8M; GPU=cpu-smoke
  SWEEP_FLAGS=--allow-ignored-vars  # gloo reads none of the setup's NCCL_* variables
  nvidia-smi() { echo "no GPU (SMOKE=1)"; }
else
  BACKENDS=gloo,nccl; B0=64M; E0=128M; N0=3; SEED001_BACKEND=nccl; S1=256M; SWEEP_FLAGS=
fi
NHOSTS=8 GRIDS="4x1, 8x1" FULL_ITERS=3
if [ "${FULL:-0}" = 1 ]; then
  NHOSTS=16 GRIDS="4x1, 8x1, 16x1" FULL_ITERS=1
  if [ "${SMOKE:-0}" = 1 ]; then E1=32M; else S1=256M E1=1G; fi
fi
E1=${E1:-$S1} ITERS=${ITERS:-$FULL_ITERS} GRIDS=${ONLY_GRIDS:-$GRIDS}  # ONLY_GRIDS="16x1, 8x1": those, in that order
HOSTS=$(seq -s ', ' -f 'node%g' 0 $((NHOSTS - 1)))
W=/tmp/network_gpu; rm -rf "$W"; mkdir -p "$W"
S="$OUT/summary.txt"
since() { echo "$(( $(date +%s) - $1 )) s"; }
GPU=${GPU:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)}
{
echo "== box"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" -c 'import torch; print("torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1 | tail -1
mpirun --version | head -1
uname -r
T0=$(date +%s)

echo; echo "== cluster up $NHOSTS (namespaces through netlink)"
"$PY" -m envmatrix cluster up $NHOSTS --name gpunet 2>&1 | tail -12
AGENT=$("$PY" -c 'from envmatrix import cluster; print(cluster.attach("gpunet").agent)')
cat > "$W/cluster.yaml" <<EOF
name: network_gpu
backend: nccl
launcher: mpirun
hosts: [node0, node1, node2, node3, node4, node5, node6, node7]
launcher_opts: {mpirun: {extra_args: [--mca, plm, rsh, --mca, plm_rsh_agent, $AGENT]}}
# NCCL between the emulated hosts: sockets over each host's eth0 (the shaped link), never IB
setups: {socket: {NCCL_SOCKET_IFNAME: eth0, NCCL_IB_DISABLE: "1"}}
probe: {timeout_s: 240}
EOF
cat > "$W/seed001.yaml" <<EOF
name: seed001
backend: $SEED001_BACKEND
launcher: mpirun
hosts: [$HOSTS]
launcher_opts: {mpirun: {extra_args: [--mca, plm, rsh, --mca, plm_rsh_agent, $AGENT]}}
setups: {socket: {NCCL_SOCKET_IFNAME: eth0, NCCL_IB_DISABLE: "1"}}
grids: [$GRIDS]
network: {default: {}, b5g: {rate: 5gbit}}
probe: {timeout_s: 300, bench: {collectives: [allreduce, ps_central, ps_sharded], min_bytes: $S1, max_bytes: $E1,
        factor: 4, iters: $ITERS, warmup: 1, check: false}}
EOF

if [ "${FULL:-0}" != 1 ]; then
echo; echo "== (1) seed 000: p2p 64M/128M, 2 hosts on GPU 0, gloo and nccl, 4 conditions"
t=$(date +%s)
timeout 300 "$PY" -m envmatrix bench conf="$W/cluster.yaml" --setup socket --grid 2x1 -c p2p -b $B0 -e $E0 \
  -n $N0 -w 1 --no-check --timeout 240 --backends $BACKENDS \
  --network default --network b5g:rate=5gbit --network b1g:rate=1gbit --network b200m:rate=200mbit \
  --out "$W/seed000" > "$W/seed000.log" 2>&1
echo "-- rc $?, $(since $t)"
"$PY" -m envmatrix report "$W/seed000" --table conditions --title "seed 000 on $GPU, 2 emulated hosts sharing GPU 0"
grep -E "error|refused" "$W/seed000.log" | tail -5
fi

echo; echo "== (2) seed 001: allreduce, ps_central, ps_sharded at $S1-$E1, $GRIDS hosts on GPU 0, nccl, 2 conditions"
t=$(date +%s)
timeout "${SEED001_LIMIT:-330}" "$PY" -m envmatrix sweep conf="$W/seed001.yaml" $SWEEP_FLAGS --out "$W/seed001" > "$W/seed001.log" 2>&1
echo "-- rc $?, $(since $t)"
"$PY" -m envmatrix report "$W/seed001" --table conditions --title "seed 001 on $GPU, emulated hosts sharing GPU 0"
grep -E "passed|error|refused" "$W/seed001.log" | tail -5

echo; echo "== transports NCCL reported (NET/Socket expected between emulated hosts)"
"$PY" - "$W/seed000" "$W/seed001" <<'PY'
import sys
from envmatrix.app.report import load_results
for run_dir in sys.argv[1:]:
    try:
        rows = load_results(run_dir)
    except Exception as exc:  # noqa: BLE001 - a summary line, not a crash
        print(run_dir, "unreadable:", exc); continue
    for r in rows:
        net = r.network or {}
        print(r.backend, r.grid, net.get("name", "default"), r.outcome, (r.nccl or {}).get("transport"),
              "sent", sum(net.get("sent_bytes", {}).values()), "restored", net.get("restored"))
PY

echo; echo "== left behind (expect nothing)"
"$PY" -m envmatrix network show 2>&1 | tail -5
"$PY" -m envmatrix cluster down --name gpunet 2>&1 | tail -3
echo "== total $(since $T0)"
} 2>&1 | tee "$S"
for run in seed000 seed001; do
  cp "$W/$run/conditions.md" "$OUT/${run}_conditions.md" 2>/dev/null
  cp "$W/$run/conditions.csv" "$OUT/${run}_conditions.csv" 2>/dev/null
  cp "$W/$run/report.html" "$OUT/${run}_report.html" 2>/dev/null
done
tar -C "$W" -czf "$OUT/network_gpu_logs.tar.gz" seed000.log seed001.log seed000/results.sqlite seed001/results.json \
  seed001/matrix.md 2>/dev/null
ls -la "$OUT"
