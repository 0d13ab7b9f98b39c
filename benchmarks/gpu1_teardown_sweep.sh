#!/usr/bin/env bash
# One-GPU check of probe.teardown on real NCCL (issue 14): pooled 1x1 sweeps of the 8 throughput setups with
# teardown=destroy and teardown=exit, interleaved; per-config wall from the stored results, and any rank log line
# that says a process ended badly.  usage (repo root on the lent box, carry [".whl"]): bash benchmarks/gpu1_teardown_sweep.sh
set -uo pipefail
source benchmarks/box_env.sh
OUT=${OUT:-/tmp/gpu1_teardown}; W="$OUT/gpu1_teardown"; mkdir -p "$W"; S="$OUT/summary.txt"
{
  nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS)='
  for round in 1 2 3; do
    for mode in destroy exit; do
      [ $round = 2 ] && mode=$([ $mode = destroy ] && echo exit || echo destroy)  # who goes first alternates
      /usr/bin/time -f "round $round teardown=$mode sweep wall %e s" timeout 200 python3 -m envmatrix sweep \
        conf=benchmarks/throughput_h200.yaml 'grids=[1x1]' probe.teardown=$mode --out "$W/r${round}_$mode" 2>&1 | tail -n 2
    done
  done
  python3 - "$W" <<'PY'
import json, pathlib, statistics, sys
root = pathlib.Path(sys.argv[1])
per = {"destroy": [], "exit": []}
for d in sorted(root.iterdir()):
    mode = d.name.split("_", 1)[1]
    res = json.loads((d / "results.json").read_text())["results"]
    walls = [r.get("duration_s") for r in res if r.get("duration_s") is not None]
    outcomes = sorted({r["outcome"] for r in res})
    tear = [k.get("timings", {}).get("teardown_s") for r in res for k in r["ranks"]]
    per[mode] += walls[1:]  # the first config waits for the server's import
    print(d.name, "outcomes", outcomes, "per-config wall", [round(w, 2) for w in walls],
          "teardown_s", [None if t is None else round(t, 2) for t in tear][:8])
for mode, walls in per.items():
    if walls:
        print(f"teardown={mode}: median per-config wall after the first {statistics.median(walls):.3f} s "
              f"(min {min(walls):.3f}, max {max(walls):.3f}, n={len(walls)})")
bad = [p for p in root.rglob("*.log") if any(s in p.read_text(errors="replace")
       for s in ("terminate called", "Segmentation", "Aborted", "has NOT been destroyed"))]
print("rank logs with an abnormal end:", [str(p.relative_to(root)) for p in bad] or "none")
PY
} > "$S" 2>&1
tar -C "$OUT" -czf "$OUT/gpu1_teardown.tar.gz" --exclude='*.sqlite*' gpu1_teardown && rm -rf "$W"
tail -n 40 "$S"
