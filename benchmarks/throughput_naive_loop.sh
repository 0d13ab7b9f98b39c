#!/usr/bin/env bash
# Naive baseline: for each setup of CONF, mpirun -np NP -x VARS python probe (see throughput_naive_loop.py).
# usage: benchmarks/throughput_naive_loop.sh CONF BACKEND NP [extra args]
set -euo pipefail
conf=${1:?conf yaml}; backend=${2:-gloo}; np=${3:-2}; shift 3 || true
exec python3 "$(dirname "$0")/throughput_naive_loop.py" --conf "$conf" --backend "$backend" --np "$np" "$@"
