#!/usr/bin/env bash
# One-GPU check on real NCCL of what a 3-rank grid measures and judges (run from the repo root on the lent box,
# carry [".whl"]): three emulated hosts share the GPU (NCCL_HOSTID each, traffic NET/Socket), the bench sweeps
# reduce_scatter, allgather and alltoall at 1K, 32K and 1M, sizes nccl-tests rounds to a multiple of the ranks
# (1M -> 1048572 B of float32), with an `expect:` floor no link reaches at each. Every floor must be judged at the
# measured size (the cell `slow`, exit 1, no "not measured"), #wrong 0, and every rank must have seen the three
# multicast pins. Then the same sweep resumed: nothing measured again.
# usage: OUT=$OUT bash benchmarks/gpu1_judged_sizes.sh      outputs: $OUT/summary.txt, $OUT/judged/*.json (~1 min)
set -uo pipefail
source benchmarks/box_env.sh
OUT=${OUT:-/tmp/gpu1_judged}; W="$OUT/judged"; mkdir -p "$W"; S="$OUT/summary.txt"
cat > "$W/c.yaml" <<'YAML'
name: judged3
backend: nccl
grids: [3x1]
launcher_opts: {local: {emulate_hosts: true}}
setups:
  baseline: {}
  ring_simple: {NCCL_ALGO: Ring, NCCL_PROTO: Simple}
probe:
  timeout_s: 120
  bench: {collectives: [reduce_scatter, allgather, alltoall], min_bytes: 1K, max_bytes: 1M, factor: 32, iters: 20, warmup: 5}
expect:
  reduce_scatter: {1K: {busbw_gbps: 100000}, 1M: {busbw_gbps: 100000}}
  allgather: {32K: {busbw_gbps: 100000}}
  alltoall: {1M: {busbw_gbps: 100000}}
YAML
{
  echo "== box"; nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS)='
  echo "== sweep 3x1 (emulated hosts), floors no link reaches"
  /usr/bin/time -f "wall %e s" timeout 300 python3 -m envmatrix sweep conf="$W/c.yaml" --out "$W/run" 2>&1 | tail -n 16
  echo "rc=${PIPESTATUS[0]}"
  echo "== resumed"
  timeout 120 python3 -m envmatrix sweep conf="$W/c.yaml" --out "$W/run" 2>&1 | grep -E "already in the store|passed|slow" | head -n 4
  echo "rc=${PIPESTATUS[0]}"
  python3 - "$W/run/results.json" <<'PY'
import json, sys
pins = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
for r in json.load(open(sys.argv[1]))["results"]:
    print(r["setup"]["name"], r["grid"], r["outcome"], "ranks", len(r["ranks"]),
          "pins on every rank", all(all(k["env"].get(p) == v for p, v in pins.items()) for k in r["ranks"]),
          "transport", (r.get("nccl") or {}).get("transport"), "placement", (r.get("placement") or {}).get("label"))
    for m in r["metrics"]:
        print("  ", m["collective"], m["size_bytes"], "B count", m["count"], "busbw %.4f GB/s" % m["busbw_gbps"], "#wrong", m["wrong"])
    for t in r["thresholds"]:
        print("  ", t["line"])
PY
} > "$S" 2>&1
cp "$W/run/results.json" "$W/run/matrix.md" "$W/c.yaml" "$OUT/" 2>/dev/null
rm -rf "$W/run"
tail -n 60 "$S"
