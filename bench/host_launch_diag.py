"""Issue 16 diagnosis: host cost per launch of envmatrix's ``host`` window against nccl-tests' C loop.

nccl-tests ``-C 1`` reports the host time of its launch loop per operation (before the stream sync); this script
measures the same quantity for envmatrix's launch paths on the same box, one process per GPU under torchrun
(bench/h200x2_host_launch.sh). Variants, each ITERS launches of an 8 B / 4 KiB / 256 KiB allreduce behind a GPU sleep
, each with the GPU free and behind a GPU sleep
(``+sleep_ahead``: the host loop never waits on the GPU):
``engine``: the bench engine's own loop (_launch_all over the builder's run, DirectNccl's bound call);
``bound``: DirectNccl's bound call in a bare loop; ``partial``: functools.partial over the ctypes function with
every argument, the stream included, converted once; ``noop_ctypes``: a ctypes call of the same arity into libc
(the foreign-call floor). Printed per rank, medians of REPEATS: host us per launch (the loop alone, what
nccl-tests -C 1 reports) and the window us per op (loop plus the sync, nccl-tests' default time).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import statistics
import subprocess
import time

import torch
import torch.distributed as dist

from envmatrix.rank.bench_engine import BenchContext, _launch_all, build_allreduce
from envmatrix.rank.nccl_direct import arena, attach

ITERS, REPEATS = 20, 7
SIZES = (8, 4096)


C_LOOP = r"""
#include <stddef.h>
typedef int (*all_reduce_fn)(const void*, void*, size_t, int, int, void*, void*);
int loop_all_reduce(void* fn, const void* send, void* recv, size_t count, int dtype, void* comm, void* stream, int iters) {
  for (int i = 0; i < iters; i++) {
    int rc = ((all_reduce_fn)fn)(send, recv, count, dtype, 0, comm, stream);
    if (rc) return rc;
  }
  return 0;
}
"""


def c_loop(rank: int):
    """A launch loop in C inside this very process (gcc on the box): is the gap the interpreter or the process?"""
    src, so = f"/tmp/launch_loop_{rank}.c", f"/tmp/launch_loop_{rank}.so"
    with open(src, "w") as fh:
        fh.write(C_LOOP)
    if subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", so, src], capture_output=True).returncode:
        return None
    lib = ctypes.CDLL(so)
    lib.loop_all_reduce.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    return lib.loop_all_reduce


def cpu_sets() -> dict[str, set[int]]:
    """The launching thread's placements tried: as started, then each quarter and half of the CPUs it may use.

    Why: a VM can show one NUMA node while its vCPUs sit on two sockets, one of them far from the GPUs.
    """
    start = sorted(os.sched_getaffinity(0))
    n = len(start)
    sets = {"as_started": set(start)}
    for parts in (4, 2):
        for i in range(parts):
            chunk = start[i * n // parts:(i + 1) * n // parts]
            if chunk:
                sets[f"cpus{chunk[0]}-{chunk[-1]}"] = set(chunk)
    return sets


def main() -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", device_id=dev)
    flag = torch.ones(1, device=dev)
    dist.all_reduce(flag)
    torch.cuda.synchronize()
    c = BenchContext(dist, torch, dev, rank, world, world, "float32")
    c.direct = attach(dist, torch, dev, "float32", world)
    c.arena = arena(c.direct, max(SIZES))
    libc = ctypes.CDLL(None)
    placements = {k: v for k, v in cpu_sets().items() if k in ("as_started", "cpus8-15", "cpus16-31")}
    loop_in_c = c_loop(rank)
    print(json.dumps({"rank": rank, "c_loop": loop_in_c is not None}), flush=True)
    out = []
    for size in SIZES:
        run, _ = build_allreduce(c, size // 4)
        for _ in range(5):
            run()
        torch.cuda.synchronize()
        stream = c.direct.current_stream()
        send = ctypes.c_void_p(c.arena.send.data_ptr())
        recv = ctypes.c_void_p(c.arena.recv.data_ptr())
        raw = functools.partial(c.direct.lib.ncclAllReduce, send, recv, ctypes.c_size_t(size // 4), c.direct.dtype,
                                ctypes.c_int(0), c.direct.comm, stream)
        bound = c.direct.all_reduce(c.arena.view(c.arena.send, size // 4, torch.float32),
                                    c.arena.view(c.arena.recv, size // 4, torch.float32))
        noop = functools.partial(libc.labs, ctypes.c_long(1))
        fn = ctypes.cast(c.direct.lib.ncclAllReduce, ctypes.c_void_p).value
        variants = {
            "c_loop": lambda: loop_in_c(fn, send.value, recv.value, size // 4, c.direct.dtype.value, c.direct.comm.value,
                                        stream.value, ITERS),
            "engine": lambda: _launch_all(run, ITERS),
            "partial": lambda: [raw() for _ in range(ITERS)],
            "noop_ctypes": lambda: [noop() for _ in range(ITERS)],
        }
        if loop_in_c is None:
            del variants["c_loop"]
        for (name, loop), (placement, cpus) in [(v, p) for v in variants.items() for p in placements.items()]:
            os.sched_setaffinity(0, cpus)
            for ahead in (False,):
                cpu, window = [], []
                for _ in range(REPEATS):
                    dist.all_reduce(flag)
                    torch.cuda.synchronize()
                    if ahead:
                        torch.cuda._sleep(int(400 * 2000))  # ~400 us of GPU work ahead: the launches only enqueue
                    c.direct.pinned = stream
                    t0 = time.perf_counter()
                    loop()
                    cpu.append((time.perf_counter() - t0) * 1e6 / ITERS)
                    torch.cuda.synchronize()
                    window.append((time.perf_counter() - t0) * 1e6 / ITERS)
                    c.direct.pinned = None
                out.append({"rank": rank, "size": size, "variant": f"{name}@{placement}" + ("+sleep_ahead" if ahead else ""),
                            "host_us_per_launch": round(statistics.median(cpu), 2),
                            "window_us": round(statistics.median(window), 2)})
    rows = [None] * world
    dist.all_gather_object(rows, out)
    if rank == 0:
        for per_rank in zip(*rows):
            print(json.dumps({"size": per_rank[0]["size"], "variant": per_rank[0]["variant"],
                              "host_us_per_launch": [r["host_us_per_launch"] for r in per_rank],
                              "window_us": [r["window_us"] for r in per_rank]}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
