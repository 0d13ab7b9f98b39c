#!/usr/bin/env bash
# One-GPU box check of the rank side on real NCCL (run from the repo root on the lent box, carry [".whl"]):
# a pooled and a cold 1x1 sweep of the 8 throughput setups, a failing setup's root cause, and bench 1x1
# through the direct NCCL launches (ncclMemAlloc buffers) in host and graph timing, and a bfloat16/p2p bench of
# four ranks on the one GPU (--emulate-hosts).
# usage: bash benchmarks/gpu1_rank_smoke.sh      outputs: $OUT/summary.txt, $OUT/gpu1_smoke.tar.gz  (~2 min)
set -uo pipefail
source benchmarks/box_env.sh
OUT=${OUT:-/tmp/gpu1_smoke}; W="$OUT/gpu1_smoke"; mkdir -p "$W"; S="$OUT/summary.txt"
{
  echo "== box"; nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS)='
  for side in pool no_pool; do
    flag=""; [ "$side" = no_pool ] && flag="--no-pool"
    echo "== sweep 1x1 ($side)"
    /usr/bin/time -f "wall %e s" timeout 200 python3 -m envmatrix sweep conf=benchmarks/throughput_h200.yaml 'grids=[1x1]' $flag --out "$W/sweep_$side" 2>&1 | tail -n 14
    echo "rc=${PIPESTATUS[0]}"
  done
  # a value NCCL itself refuses at init (envmatrix refuses a malformed NCCL_PROTO before any launch, exit 2)
  echo "== failing setup (NCCL_NET=bogus_net), 1x1"
  timeout 120 python3 -m envmatrix sweep conf=benchmarks/throughput_h200.yaml 'grids=[1x1]' '+setups.bogus={NCCL_NET: bogus_net}' \
    --out "$W/fail" 2>&1 | grep -E "bogus|root cause|rank 0" | head -n 8
  python3 - "$W" <<'PY'
import json, sys, pathlib
for d in ("sweep_pool", "sweep_no_pool", "fail"):
    p = pathlib.Path(sys.argv[1]) / d / "results.json"
    if not p.exists():
        print(d, "no results.json"); continue
    for r in json.loads(p.read_text())["results"]:
        starts = sorted({k.get("versions", {}).get("start", "?") for k in r["ranks"]})
        t = (r["ranks"][0].get("timings") or {}) if r["ranks"] else {}
        print(d, r["setup"]["name"], r["outcome"], starts, "init %.2f teardown %.2f" % (t.get("init_s", -1), t.get("teardown_s", -1)),
              ((r.get("root_cause") or {}).get("line") or "")[:140])
        if d == "fail":  # a rank failing in init still names its host, GPU and the NCCL it had loaded
            for k in r["ranks"]:
                v = k.get("versions") or {}
                print("  rank", k.get("rank"), k.get("outcome"), k.get("hostname"), k.get("gpu_uuid"), k.get("pci_bus_id"),
                      "torch", v.get("torch"), "nccl built", v.get("nccl_torch_built"), "loaded", v.get("nccl_loaded"))
PY
  for timing in host graph; do
    echo "== bench 1x1 $timing"
    timeout 150 python3 -m envmatrix bench --grid 1x1 -b 8 -e 64M -f 8 -n 20 -w 5 -c allreduce,allgather,alltoall --timing $timing \
      --out "$W/bench_$timing" 2>&1 | tail -n 30
    echo "rc=${PIPESTATUS[0]}"
  done
  # four ranks sharing the GPU as two emulated hosts: p2p is the receiver's row (one rank reporting), bfloat16
  # reductions check exactly (#wrong 0)
  echo "== bench 2x2 --emulate-hosts, bfloat16, p2p"
  timeout 200 python3 -m envmatrix bench --grid 2x2 --emulate-hosts -d bfloat16 -b 1K -e 1M -f 32 -n 5 -w 2 \
    -c allreduce,reduce_scatter,p2p --out "$W/bench_bf16" 2>&1 | tail -n 24
  echo "rc=${PIPESTATUS[0]}"
  python3 -c "import json,sqlite3,sys; db=sqlite3.connect(sys.argv[1]); rows=[json.loads(r) for (r,) in db.execute('SELECT row_json FROM metrics')]; print('rows', len(rows), 'wrong', sorted({r.get('wrong') for r in rows}), 'p2p ranks_reporting', sorted({r['ranks_reporting'] for r in rows if r['collective']=='p2p'}))" "$W/bench_bf16/results.sqlite"
} > "$S" 2>&1
tar -C "$OUT" -czf "$OUT/gpu1_smoke.tar.gz" --exclude='*.sqlite*' gpu1_smoke && rm -rf "$W"
tail -n 80 "$S"
