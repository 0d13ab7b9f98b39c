"""Issue 16 diagnosis: is the small-message gap to nccl-tests the rank process's state (torch loaded, torch's
process group and its threads) rather than how envmatrix launches?

Run as nccl-tests runs: ``mpirun -np 2 python3 bench/process_state_diag.py MODE PORT`` (bench/h200x2_process_state.sh),
one process per GPU, an MPI barrier before every window and ``cudaStreamSynchronize`` after it, a communicator of
its own (ncclCommInitRank, id broadcast over MPI), ncclMemAlloc buffers, a non-blocking stream made with the driver
API, ITERS ncclAllReduce launches per window from a C loop (bench/c_launch_loop.py) or a Python ctypes loop.
MODE ``none`` never imports torch; ``torch_cuda`` imports torch and makes its CUDA context first; ``torch_pg`` also
starts torch's NCCL process group (its watchdog and heartbeat threads, its communicator) and adds variants: the
launches on torch's communicator, and the window opened by envmatrix's barrier (torch all_reduce + device sync)
instead of MPI's; ``torch_pg_nomon`` is torch_pg with torch's heartbeat monitor and flight recorder off (``_mon0``, ``_fr0``: one of them;
``_aeh0``: async error handling off; ``_lazy``: no device_id, the communicator made at the first collective);
``torch_pg_destroyed`` starts torch's NCCL group and destroys it before timing; ``torch_gloo`` starts a gloo group
instead. Every mode also opens windows with a one-element NCCL allreduce on the timed stream as the barrier. One JSON line per (mode, variant, size) from rank 0: rank-mean window us per operation and
rank-mean host us per launch (the loop alone, what nccl-tests ``-C 1`` reports), medians of REPEATS.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import statistics
import sys
import time

from mpi4py import MPI

from c_launch_loop import compile_loop

ITERS, WARMUP = 20, 5
REPEATS = int(os.environ.get("REPEATS", 9))
SIZES = tuple(int(x) for x in os.environ.get("SIZES", "8,4096,262144").split(","))
NCCL_FLOAT32, NCCL_SUM = 7, 0


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def check(rc: int, what: str) -> None:
    if rc:
        raise RuntimeError(f"{what}: error {rc}")


def libnccl_path() -> str:
    import nvidia.nccl  # the wheel torch loads its libnccl from; a namespace package, no torch import

    return glob.glob(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so*"))[0]


def main() -> None:
    mode, port = sys.argv[1], sys.argv[2]
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    torch = dist = None
    if mode.startswith("torch"):
        import torch

        torch.cuda.set_device(rank)
        torch.zeros(1, device=f"cuda:{rank}")
    knobs = {"torch_pg_nomon": dict(TORCH_NCCL_ENABLE_MONITORING="0", TORCH_FR_BUFFER_SIZE="0"),
             "torch_pg_mon0": dict(TORCH_NCCL_ENABLE_MONITORING="0"),
             "torch_pg_fr0": dict(TORCH_FR_BUFFER_SIZE="0"),
             "torch_pg_aeh0": dict(TORCH_NCCL_ASYNC_ERROR_HANDLING="0"),
             "torch_pg_lazy": {}}
    os.environ.update(knobs.get(mode, {}))
    if mode.startswith(("torch_pg", "torch_gloo")):
        import torch.distributed as dist

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE=str(size),
                          LOCAL_RANK=str(rank))
        dev = torch.device("cuda", rank)
        if mode == "torch_gloo":
            dist.init_process_group("gloo")
            flag = torch.ones(1)
        else:
            dist.init_process_group("nccl", **({} if mode == "torch_pg_lazy" else {"device_id": dev}))
            flag = torch.ones(1, device=dev)
        dist.all_reduce(flag)
        torch.cuda.synchronize()
    if mode == "torch_pg_destroyed":
        dist.destroy_process_group()  # its communicator, watchdog and heartbeat threads gone; torch still loaded

    cuda = ctypes.CDLL("libcuda.so.1")
    check(cuda.cuInit(0), "cuInit")
    device, ctx = ctypes.c_int(), ctypes.c_void_p()
    check(cuda.cuDeviceGet(ctypes.byref(device), rank), "cuDeviceGet")
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")  # the primary context: the one torch and nccl-tests use
    stream = ctypes.c_void_p()
    check(cuda.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")  # CU_STREAM_NON_BLOCKING
    cuda.cuStreamSynchronize.argtypes = [ctypes.c_void_p]

    nccl = ctypes.CDLL(libnccl_path())
    uid = NcclUniqueId()
    if rank == 0:
        check(nccl.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
    uid = NcclUniqueId.from_buffer_copy(world.bcast(bytes(uid), root=0))
    own = ctypes.c_void_p()
    check(nccl.ncclCommInitRank(ctypes.byref(own), size, uid, rank), "ncclCommInitRank")
    comms = {"own": own.value}
    if mode.startswith("torch_pg") and mode != "torch_pg_destroyed":
        group = dist.distributed_c10d._get_default_group()
        comms["torch"] = int(group._get_backend(torch.device("cuda", rank))._comm_ptr())
    send, recv = ctypes.c_void_p(), ctypes.c_void_p()
    nccl.ncclMemAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    check(nccl.ncclMemAlloc(ctypes.byref(send), max(SIZES)), "ncclMemAlloc")
    check(nccl.ncclMemAlloc(ctypes.byref(recv), max(SIZES)), "ncclMemAlloc")
    nccl.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_void_p, ctypes.c_void_p]
    loop = compile_loop(rank)
    fn = ctypes.cast(nccl.ncclAllReduce, ctypes.c_void_p).value

    def mpi_barrier() -> None:
        world.Barrier()

    def torch_barrier() -> None:
        dist.all_reduce(flag)
        torch.cuda.synchronize()

    one = ctypes.c_void_p()
    check(nccl.ncclMemAlloc(ctypes.byref(one), 512), "ncclMemAlloc")

    def nccl_barrier() -> None:
        """A one-element allreduce on the timed stream, synced: the last rank to arrive does nothing after its launch
        but wait, so both ranks leave together (torch's all_reduce does its bookkeeping after the launch)."""
        check(nccl.ncclAllReduce(one, one, 1, NCCL_FLOAT32, NCCL_SUM, own, stream), "barrier")
        check(cuda.cuStreamSynchronize(stream), "barrier sync")

    barriers = {"mpi": mpi_barrier, "torch": torch_barrier, "nccl": nccl_barrier,
                "torch+nccl": lambda: (torch_barrier(), nccl_barrier())}
    variants = [("own", "c_loop", "mpi"), ("own", "ctypes", "mpi"), ("own", "c_loop", "nccl")]
    if mode.startswith("torch_pg") and mode != "torch_pg_destroyed":
        variants += [("torch", "c_loop", "mpi"), ("own", "c_loop", "torch"), ("own", "c_loop", "torch+nccl")]
    out = []
    for nbytes in SIZES:
        count = nbytes // 4
        samples: dict[tuple, tuple[list, list]] = {v: ([], []) for v in variants}
        for rep in range(WARMUP + REPEATS):
            order = variants[rep % len(variants):] + variants[:rep % len(variants)]
            for variant in order:
                comm_name, how, barrier = variant
                args = [send.value, recv.value, count, NCCL_FLOAT32, NCCL_SUM, comms[comm_name], stream.value]
                if how == "c_loop":
                    arr = (ctypes.c_uint64 * 7)(*args)
                    body = lambda: check(loop.loop_args(fn, 7, arr, ITERS), "C loop")  # noqa: E731
                else:
                    body = lambda: [check(nccl.ncclAllReduce(*args), "ncclAllReduce") for _ in range(ITERS)]  # noqa: E731
                barriers[barrier]()
                t0 = time.perf_counter()
                body()
                t1 = time.perf_counter()
                check(cuda.cuStreamSynchronize(stream), "cuStreamSynchronize")
                t2 = time.perf_counter()
                if rep >= WARMUP:
                    samples[variant][0].append((t2 - t0) * 1e6 / ITERS)
                    samples[variant][1].append((t1 - t0) * 1e6 / ITERS)
        for variant, (window, host) in samples.items():
            out.append({"variant": "/".join(variant), "size": nbytes, "window": statistics.median(window),
                        "host": statistics.median(host)})
    rows = world.gather(out, root=0)
    if rank == 0:
        for per_rank in zip(*rows):
            first = per_rank[0]
            print(json.dumps({"mode": mode + os.environ.get("PLACEMENT", ""), "variant": first["variant"], "size": first["size"],
                              "window_us": round(statistics.fmean(r["window"] for r in per_rank), 2),
                              "host_us": round(statistics.fmean(r["host"] for r in per_rank), 2),
                              "window_per_rank": [round(r["window"], 2) for r in per_rank]}), flush=True)
    nccl.ncclCommDestroy(own)
    if dist is not None and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
