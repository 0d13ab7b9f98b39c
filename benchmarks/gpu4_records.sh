#!/usr/bin/env bash
# The 4-GPU runs issue 19 owed (one device call on a 4-GPU kind, < 9 min; repo root on the box, carry [".whl"]):
#   T  warm-pool throughput on 1x4: the 8 passing setups of throughput_h200.yaml, envmatrix's pool vs the naive
#      `mpirun -np 4 python probe` loop, 2 rounds interleaved (benchmarks/throughput_bench.py);
#   S  seed 003 on four real GPUs: `sweep conf=aws_ofi --emulate-hosts` on its 1x4 and 2x2 rows (2x2: two emulated
#      hosts of two GPUs each, NET between them), then `bisect conf=aws_ofi --failing 2x2` on that store;
#   H  the hidden two-failure env (benchmarks/emulated_hosts/hidden_two_failures.sh) bisected on 2x2;
#   V  which of NCCL_ALGO=PAT / NCCL_PROTO=LL128 / the seed's harmless variables fail on 1x4 (one host, NVLink)
#      vs 2x2 (two emulated hosts): a real "works on one node, fails on two" variable on this box, if any.
# The fidelity table runs with `GPUS=4 bash benchmarks/h200x2_fidelity.sh`, the slowed-GPU host bisect with
# `NGPU=4 bash benchmarks/h200x2_host_bisect.sh` (separate calls: each needs most of one).
# usage: PARTS="T S H V" bash benchmarks/gpu4_records.sh      outputs: $OUT/summary.txt, $OUT/gpu4_records.tar.gz
set -uo pipefail
source benchmarks/box_env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PARTS=${PARTS:-T S H V}
W=/tmp/gpu4_records; rm -rf "$W"; mkdir -p "$W"
S="$OUT/summary.txt"
since() { echo "$(( $(date +%s) - $1 )) s"; }

bisect_line() {  # the answer of a bisect JSON in one line
python3 - "$1" <<'PY'
import json, sys
try:
    reports = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit(f"no bisect JSON: {exc}")
for r in reports:
    print(r["name"], r["grid"], "status", r["status"], "culprits", r["culprits"], "probes launched", r["probes_launched"],
          "(search", r["search_probes"], "free", r["free_probes"], ") recommended", r["recommended_env"], "proven", r["recommended_proven"])
PY
}

{
  echo "== box"; nvidia-smi -L
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
  env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS)=' | sort
  echo "parts: $PARTS"
  for p in $PARTS; do
    t0=$(date +%s)
    case $p in
      T)
        echo "== (T) throughput 1x4: 8 setups, pool vs naive, 2 rounds interleaved"
        timeout 300 python3 benchmarks/throughput_bench.py --conf benchmarks/throughput_h200.yaml --grid 1x4 --backend nccl \
          --rounds 2 --sides pool,naive --out "$W/tp" | grep -v '^{'
        ;;
      S)
        echo "== (S) sweep conf=aws_ofi --emulate-hosts grids=[1x4,2x2], then bisect conf=aws_ofi --failing 2x2"
        timeout 150 python3 -m envmatrix sweep conf=aws_ofi 'grids=[1x4,2x2]' --emulate-hosts --out "$W/aws_ofi" | tail -n 22
        echo "-- sweep rc ${PIPESTATUS[0]}, $(since "$t0")"
        timeout 200 python3 -m envmatrix bisect conf=aws_ofi --failing 2x2 --emulate-hosts --out "$W/aws_ofi" \
          --json "$W/aws_ofi/bisect.json" | grep -E "culprit|proven|probes|Signature|error|exit" | head -n 30
        echo "-- bisect rc ${PIPESTATUS[0]}, $(since "$t0")"
        bisect_line "$W/aws_ofi/bisect.json"
        ;;
      H)
        echo "== (H) hidden two-failure env (NCCL_NET=IB + NCCL_ALGO=PAT among 10 harmless) bisected on 2x2"
        timeout 200 python3 -m envmatrix bisect --grid 2x2 --emulate-hosts --env-file benchmarks/emulated_hosts/hidden_two_failures.sh \
          --out "$W/hidden" --json "$W/hidden/bisect.json" | grep -E "culprit|proven|probes|Signature|error|exit" | head -n 30
        echo "-- bisect rc ${PIPESTATUS[0]}, $(since "$t0")"
        bisect_line "$W/hidden/bisect.json"
        ;;
      V)
        echo "== (V) one node vs two: PAT, LL128, the seed's harmless NCCL variables, the inherited env; 1x4 and 2x2"
        timeout 150 python3 -m envmatrix sweep conf=benchmarks/emulated_hosts/seed003_shape.yaml 'grids=[1x4,2x2]' \
          '+setups.ll128={NCCL_PROTO: LL128}' --emulate-hosts --out "$W/split" | tail -n 14
        echo "-- sweep rc ${PIPESTATUS[0]}"
        ;;
    esac
    echo "-- part $p: $(since "$t0")"
  done
} > "$S" 2>&1
find "$W" -name '*.sqlite*' -delete; find "$W" -type d -name logs -prune -exec rm -rf {} +
tar -C /tmp -czf "$OUT/gpu4_records.tar.gz" gpu4_records
tail -n 120 "$S"
