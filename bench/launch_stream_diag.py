"""Issue 16 diagnosis: does the stream the ``host`` window launches on explain the small-message gap?

nccl-tests launches on streams it creates with ``cudaStreamNonBlocking``; envmatrix's ``host`` window launched on
torch's current stream, which is the legacy default stream (handle 0). Runs under torchrun, one process per GPU
(`DIAG=launch_stream bash bench/h200x2_c_loop.sh`). For AR/AG/RS/A2A/bcast at 8 B - 256 KiB it times, in the same processes and
interleaved, the engine's own ``host`` window (rank/bench_engine._timed_host) and the C launch loop of
bench/c_loop_diag.py, each on: ``default`` (torch's current stream), ``torch_nb`` (a torch.cuda.Stream: torch's pool,
non-blocking) and ``cudart_nb`` (cudaStreamCreateWithFlags(cudaStreamNonBlocking) by the libcudart torch mapped, as
nccl-tests). One JSON line per (collective, size, variant): rank-mean window in us per operation, median of REPEATS.
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics

import torch
import torch.distributed as dist

from c_loop_diag import ITERS, as_int, c_window, compile_loop
from envmatrix.bench.formulas import collective_spec
from envmatrix.bench.sizes import aligned_count
from envmatrix.rank.bench_engine import BUILDERS, BenchContext, _barrier, _timed_host
from envmatrix.rank.nccl_direct import arena, attach, mapped_library

REPEATS, WARMUP = 7, 5
SIZES = (8, 512, 4096, 32768, 262144)
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast")


def cudart_stream() -> ctypes.c_void_p:
    lib = ctypes.CDLL(mapped_library("/libcudart.so"))
    handle = ctypes.c_void_p()
    rc = lib.cudaStreamCreateWithFlags(ctypes.byref(handle), ctypes.c_uint(1))  # cudaStreamNonBlocking
    if rc:
        raise RuntimeError(f"cudaStreamCreateWithFlags: CUDA error {rc}")
    return handle


def main() -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", device_id=dev)
    c = BenchContext(dist, torch, dev, rank, world, world, "float32")
    _barrier(c)
    c.direct = attach(dist, torch, dev, "float32", world)
    c.arena = arena(c.direct, max(SIZES))
    loop = compile_loop(rank)
    own = torch.cuda.Stream(device=dev)
    streams = {"default": torch.cuda.current_stream(dev), "torch_nb": own,
               "cudart_nb": torch.cuda.ExternalStream(as_int(cudart_stream()), device=dev)}
    print(json.dumps({"rank": rank, "streams": {k: v.cuda_stream for k, v in streams.items()},
                      "torch_stream_priority": own.priority}), flush=True)
    variants = [(how, where) for how in ("engine", "c_loop") for where in streams]
    out = []
    for name in COLLECTIVES:
        spec = collective_spec(name)
        for size in SIZES:
            count = aligned_count(size, c.type_size, world, spec.split_by_ranks)
            run, verify = BUILDERS[name](c, count)
            for _ in range(WARMUP):
                run()
            samples: dict[str, list[float]] = {f"{h}@{w}": [] for h, w in variants}
            for rep in range(REPEATS):
                order = variants[rep % len(variants):] + variants[:rep % len(variants)]  # rotate who goes first
                for how, where in order:
                    stream = streams[where]
                    if how == "engine":
                        c.launch_stream = stream
                        samples[f"{how}@{where}"].append(_timed_host(c, run, ITERS))
                    else:
                        samples[f"{how}@{where}"].append(c_window(c, loop, name, run.direct_launch, stream.cuda_stream, count))
            wrong = verify()
            for variant, xs in samples.items():
                out.append({"collective": name, "size": count * c.type_size, "variant": variant,
                            "us": statistics.median(xs), "wrong": wrong})
    rows = [None] * world
    dist.all_gather_object(rows, out)
    if rank == 0:
        for per_rank in zip(*rows):
            first = per_rank[0]
            print(json.dumps({"collective": first["collective"], "size": first["size"], "variant": first["variant"],
                              "us": round(statistics.fmean(r["us"] for r in per_rank), 2),
                              "per_rank": [round(r["us"], 2) for r in per_rank], "wrong": sum(r["wrong"] for r in per_rank)}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
