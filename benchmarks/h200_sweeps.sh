#!/usr/bin/env bash
# The issue-2 runs on the 4xH200 box: seed 003's conf and the transport conf, NCCL backend.
set -uo pipefail
source benchmarks/box_env.sh
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
nvidia-smi topo -m
python3 -m envmatrix sweep conf=aws_ofi.yaml 'grids=[1x4,2x2]' --out "$OUT/aws_ofi"
python3 -m envmatrix sweep conf=h200_transports.yaml --out "$OUT/h200_transports"
# one NCCL_DEBUG=INFO run to show which transport each grid really used
python3 -m envmatrix sweep conf=benchmarks/transport_proof.yaml --out "$OUT/transport_proof"
grep -h -o -E "via (P2P|SHM|NET)/[A-Za-z/]+" "$OUT"/transport_proof/logs/*/*/rank*.log | sort | uniq -c
for d in aws_ofi h200_transports transport_proof; do tar -C "$OUT" -czf "$OUT/$d.tar.gz" "$d" && rm -rf "$OUT/$d"; done
