#!/usr/bin/env python3
"""A fake all_reduce_perf: prints nccl-tests 2.19.6's table with a busbw that is a
deterministic function of NCCL_ALGO, NCCL_PROTO, NCCL_MAX_NCHANNELS, NCCL_BUFFSIZE
and the size. NCCL_ALGO=Tree with NCCL_PROTO=LL128 fails like a real NCCL error.

busbw(size) = algo x proto(size) x channels x buffsize, where LL wins below 64 KiB
and Simple above, so the best protocol depends on the size (tuner CSV test).
The best at 1 MiB is Ring, LL128, 8 channels, 4 MiB buffers: 100 x 1.2 x 1.0 x 1.0 = 120.
FAKE_NCCL_SLEEP=s sleeps before printing (a trial in flight for the kill test).
"""
import os
import sys
import time

SIZES = [1024, 16384, 262144, 1048576]
ALGO = {"Ring": 100.0, "Tree": 80.0}
CHANNELS = {"2": 0.5, "4": 0.8, "8": 1.0}
BUFFSIZE = {"1048576": 0.9, "4194304": 1.0}


def proto(name, size):
    small = size < 65536
    return {"LL": 1.1 if small else 0.6, "LL128": 1.0 if small else 1.2, "Simple": 0.5 if small else 1.1}[name]


def busbw(env, size):
    algo = ALGO[env.get("NCCL_ALGO", "Ring")]
    return algo * proto(env.get("NCCL_PROTO", "Simple"), size) * CHANNELS[env.get("NCCL_MAX_NCHANNELS", "4")] \
        * BUFFSIZE[env.get("NCCL_BUFFSIZE", "4194304")]


def main():
    env = os.environ
    time.sleep(float(env.get("FAKE_NCCL_SLEEP", "0")))
    print("# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22809")
    print("# Collective test starting: all_reduce_perf")
    print("# nThread 1 nGpus 1 minBytes 1024 maxBytes 1048576 step: 4(factor) warmup iters: 1 iters: 1 agg iters: 1 validation: 1 graph: 0")
    print("#")
    if env.get("NCCL_ALGO") == "Tree" and env.get("NCCL_PROTO") == "LL128":
        print("fake: Test NCCL failure common.cu:1279 'invalid usage (run with NCCL_DEBUG=WARN for details) / '")
        print(" .. fake pid 1: Test failure common.cu:1150")
        sys.stdout.flush()
        sys.exit(3)
    print("#                                                              out-of-place                       in-place          ")
    print("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ")
    print("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         ")
    total = 0.0
    for size in SIZES:
        bw = busbw(env, size)
        algbw = bw  # one rank: factor ignored, the table only needs to be well formed
        t = size / (algbw * 1e3)
        total += bw
        row = f"{size:12d}  {size // 4:12d}     float     sum      -1  {t:7.2f}  {algbw:6.2f}  {bw:6.2f}       0  {t:7.2f}  {algbw:6.2f}  {bw:6.2f}       0"
        print(row)
    print("# Out of bounds values : 0 OK")
    print(f"# Avg bus bandwidth    : {total / len(SIZES):.3f} ")
    print("#")
    print("# Collective test concluded: all_reduce_perf")
    print("#")


if __name__ == "__main__":
    main()
