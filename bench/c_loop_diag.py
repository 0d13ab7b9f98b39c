"""Issue 16 prototype: would a launch loop in C inside the rank bring ``host`` timing to nccl-tests' figures?

Runs under torchrun, one process per GPU (bench/h200x2_c_loop.sh). For AR/AG/RS/bcast/A2A at 8 B - 256 KiB it
times, in the same processes and interleaved, the engine's own ``host`` window (rank/bench_engine._timed_host on the
builders' direct launches) and the same window with the ITERS launches made by one call into a C loop compiled on
the box (gcc): the same libnccl functions, arguments, communicator, buffers and stream. Prints one JSON line per
(collective, size, variant): the rank-mean window in us per operation, median of REPEATS.
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import time
from typing import Callable

import torch
import torch.distributed as dist

from c_launch_loop import compile_loop
from envmatrix.bench.formulas import collective_spec
from envmatrix.bench.sizes import aligned_count
from envmatrix.rank.bench_engine import BUILDERS, BenchContext, _barrier, _timed_host
from envmatrix.rank.nccl_direct import arena, attach

ITERS, REPEATS, WARMUP = 20, 5, 5
SIZES = (8, 64, 512, 4096, 32768, 262144)
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast")

def as_int(x) -> int:
    return int(getattr(x, "value", x) or 0)


def c_window(c: BenchContext, loop, name: str, direct, stream: int, count: int) -> float:
    nccl = c.direct.lib
    addr = lambda f: ctypes.cast(f, ctypes.c_void_p).value
    if name == "alltoall":
        chunk = count // c.world  # the builder's split: one chunk per peer, as nccl-tests
        send, recv = c.arena.send.data_ptr(), c.arena.recv.data_ptr()
        call = lambda: loop.loop_alltoall(addr(nccl.ncclGroupStart), addr(nccl.ncclSend), addr(nccl.ncclRecv),
                                          addr(nccl.ncclGroupEnd), send, recv, chunk * c.type_size, chunk,
                                          as_int(c.direct.dtype), c.world, as_int(c.direct.comm), stream, ITERS)
    else:
        args = [as_int(x) for x in direct.head] + [stream]
        arr = (ctypes.c_uint64 * len(args))(*args)
        fn = addr(direct.fn)
        call = lambda: loop.loop_args(fn, len(args), arr, ITERS)
    _barrier(c)
    t0 = time.perf_counter()
    rc = call()
    c.sync()
    if rc:
        raise RuntimeError(f"{name}: NCCL error {rc} in the C loop")
    return (time.perf_counter() - t0) * 1e6 / ITERS


Variant = Callable[[str, Callable, int], float]  # (collective, the builder's run, count) -> us per op of one window


def start_rank() -> BenchContext:
    """torchrun's rank on its GPU, torch's NCCL group, direct launches on ncclMemAlloc'd buffers (as the engine)."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", device_id=dev)
    c = BenchContext(dist, torch, dev, rank, world, world, "float32")
    _barrier(c)
    c.direct = attach(dist, torch, dev, "float32", world)
    c.arena = arena(c.direct, max(SIZES))
    return c


def sweep(c: BenchContext, variants: dict[str, Variant]) -> list[dict]:
    """Every (collective, size): warmups, then REPEATS rounds of one window per variant, who goes first rotating."""
    names, out = list(variants), []
    for name in COLLECTIVES:
        spec = collective_spec(name)
        for size in SIZES:
            count = aligned_count(size, c.type_size, c.world, spec.split_by_ranks)
            run, verify = BUILDERS[name](c, count)
            for _ in range(WARMUP):
                run()
            samples: dict[str, list[float]] = {v: [] for v in names}
            for rep in range(REPEATS):
                for variant in names[rep % len(names):] + names[:rep % len(names)]:
                    samples[variant].append(variants[variant](name, run, count))
            wrong = verify()
            for variant, xs in samples.items():
                out.append({"collective": name, "size": count * c.type_size, "variant": variant,
                            "us": statistics.median(xs), "wrong": wrong})
    return out


def print_rank_means(c: BenchContext, out: list[dict]) -> None:
    """One JSON line per (collective, size, variant) from rank 0: the rank mean, as nccl-tests reports."""
    rows = [None] * c.world
    dist.all_gather_object(rows, out)
    if c.rank == 0:
        for per_rank in zip(*rows):
            first = per_rank[0]
            print(json.dumps({"collective": first["collective"], "size": first["size"], "variant": first["variant"],
                              "us": round(statistics.fmean(r["us"] for r in per_rank), 2),
                              "per_rank": [round(r["us"], 2) for r in per_rank], "wrong": sum(r["wrong"] for r in per_rank)}))
    dist.destroy_process_group()


def main() -> None:
    c = start_rank()
    loop = compile_loop(c.rank)
    stream = as_int(c.direct.current_stream())
    print_rank_means(c, sweep(c, {
        "engine_host": lambda name, run, count: _timed_host(c, run, ITERS),
        "c_loop": lambda name, run, count: c_window(c, loop, name, run.direct_launch, stream, count),
    }))


if __name__ == "__main__":
    main()
