#!/usr/bin/env bash
# Issue 12 (mpi4py) on the 2xH200 box, < 3 min: the same grids under the box's OpenMPI mpirun, first with the
# mpi probe (MPI_COMM_WORLD vs the launcher, mpi4py Allreduce, hostnames; no torch, no NCCL), then with the
# builtin probe (torch.distributed on NCCL). Both pass: launch, MPI and NCCL are fine; mpi passes and builtin
# fails: look at NCCL. Also records the dry-run's exact mpirun line. Outputs: 4 files in $OUT.
# Run from the repo root: bash benchmarks/h200x2_mpi.sh
set -uo pipefail
source benchmarks/box_env.sh
W="$OUT/h200x2_mpi"
mkdir -p "$W"
{
  mpirun --version | head -1
  python3 -c "import mpi4py, sys; print('mpi4py', mpi4py.__version__, 'python', sys.version.split()[0])"
  python3 -m envmatrix sweep conf=benchmarks/h200x2_mpi.yaml --dry-run --out "$W/mpi" probe=mpi | tail -n 3
  echo "== probe=mpi"
  time python3 -m envmatrix sweep conf=benchmarks/h200x2_mpi.yaml probe=mpi --out "$W/mpi"
  echo "== probe=builtin"
  time python3 -m envmatrix sweep conf=benchmarks/h200x2_mpi.yaml probe=builtin probe.nccl_debug=INFO --out "$W/builtin"
  python3 - "$W" <<'PY'
import json, sys
for probe in ("mpi", "builtin"):
    for r in json.load(open(f"{sys.argv[1]}/{probe}/results.json"))["results"]:
        checks = {c["collective"]: c.get("wrong") for rank in r["ranks"] for c in rank.get("checks", [])}
        print(probe, r["grid"], r["setup"]["name"], r["outcome"], f"{r['duration_s']:.1f}s",
              r["versions"].get("mpi_library") or r["versions"].get("nccl_loaded", ""), r.get("nccl", {}).get("transport", ""), checks)
PY
} > "$W/console.log" 2>&1
cp "$W/mpi/matrix.md" "$OUT/mpi_matrix.md"; cp "$W/builtin/matrix.md" "$OUT/builtin_matrix.md"
cp "$W/console.log" "$OUT/console.log"
tar -C "$OUT" -czf "$OUT/h200x2_mpi.tar.gz" h200x2_mpi && rm -rf "$W"
tail -n 30 "$OUT/console.log"
