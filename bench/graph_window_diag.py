"""Issue 16 diagnosis: where envmatrix's graph-mode window loses ~4 us per small allreduce against nccl-tests -G 1.

Run on the 2-GPU box, one process per GPU (bench/h200x2_graph_window.sh):
    python -m torch.distributed.run --nproc-per-node 2 bench/graph_window_diag.py
Each variant captures ITERS direct ncclAllReduce launches (envmatrix's own path: nccl_direct on torch's
communicator, ncclMemAlloc buffers) into one CUDA graph, then times one replay with the host clock, as
envmatrix's ``graph`` timing does. Printed per rank: the window's start on the shared wall clock (both ranks run on
one host, so the difference is the skew the barrier left), the window in us per op, and the device time between
CUDA events around the replay. Variants: ``as_is`` (torch all_reduce barrier, first replay timed),
``warm`` (one untimed replay first), ``warm_gloo`` (plus a gloo barrier over the host after the NCCL one), each on
torch's communicator; ``own_comm`` is ``warm_gloo`` on a communicator this script makes itself with
ncclCommInitRank (no torch ProcessGroup behind it), and ``host_torch_comm`` / ``host_own_comm`` time ITERS launches
without a graph (envmatrix's ``host`` window) on each communicator.
"""

from __future__ import annotations

import ctypes
import json
import os
import time

import torch
import torch.distributed as dist

from envmatrix.rank.nccl_direct import DirectNccl, arena, attach

ITERS, REPEATS = 20, 5
SIZES = (8, 4096, 262144)
VARIANTS = ("warm_gloo", "raw_graph", "torch_graph_global", "own_comm", "host_torch_comm", "host_own_comm")


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def own_communicator(lib, rank: int, gloo) -> int:
    """A second communicator over the same two GPUs, made as nccl-tests makes its own."""
    uid = UniqueId()
    if rank == 0:
        assert lib.ncclGetUniqueId(ctypes.byref(uid)) == 0
    box = [bytes(ctypes.string_at(ctypes.addressof(uid), 128))]
    dist.broadcast_object_list(box, src=0, group=gloo)
    uid = UniqueId.from_buffer_copy(box[0])
    comm = ctypes.c_void_p()
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
    assert lib.ncclCommInitRank(ctypes.byref(comm), 2, uid, rank) == 0
    return comm.value


def cudart():
    """The CUDA runtime torch loaded (its cudaStream_t handles are what torch's streams hold)."""
    with open("/proc/self/maps") as maps:
        paths = [line.split()[-1] for line in maps if "libcudart.so" in line]
    lib = ctypes.CDLL(paths[0] if paths else "libcudart.so")
    lib.cudaStreamBeginCapture.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.cudaStreamEndCapture.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.cudaGraphInstantiate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_ulonglong]
    lib.cudaGraphLaunch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
    lib.cudaGraphExecDestroy.argtypes = [ctypes.c_void_p]
    lib.cudaGraphDestroy.argtypes = [ctypes.c_void_p]
    return lib, (paths[0] if paths else "libcudart.so (not mapped by torch)")


def raw_window(rt, nccl, call, dev, barrier):
    """nccl-tests' own capture: cudaStreamBeginCapture (global mode) on a plain stream, instantiate, launch."""
    stream = torch.cuda.Stream(device=dev)
    handle = ctypes.c_void_p(stream.cuda_stream)
    torch.cuda.synchronize()
    nccl.pinned = handle
    assert rt.cudaStreamBeginCapture(handle, 0) == 0
    for _ in range(ITERS):
        call()
    graph, exe = ctypes.c_void_p(), ctypes.c_void_p()
    assert rt.cudaStreamEndCapture(handle, ctypes.byref(graph)) == 0
    nccl.pinned = None
    assert rt.cudaGraphInstantiate(ctypes.byref(exe), graph, 0) == 0
    assert rt.cudaGraphLaunch(exe, handle) == 0 and rt.cudaStreamSynchronize(handle) == 0
    barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    wall = time.time_ns()
    t0 = time.perf_counter()
    start.record(stream)
    assert rt.cudaGraphLaunch(exe, handle) == 0
    end.record(stream)
    torch.cuda.synchronize()
    window = (time.perf_counter() - t0) * 1e6 / ITERS
    rt.cudaGraphExecDestroy(exe)
    rt.cudaGraphDestroy(graph)
    return wall, window, start.elapsed_time(end) * 1e3 / ITERS


def main() -> None:
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", device_id=dev)
    gloo = dist.new_group(backend="gloo")
    flag = torch.ones(1, device=dev)
    dist.all_reduce(flag)
    torch.cuda.synchronize()
    direct = attach(dist, torch, dev, "float32", 2)
    assert direct is not None, "no direct NCCL path"
    block = arena(direct, max(SIZES))
    assert block is not None, "no ncclMemAlloc buffers"
    own = DirectNccl(direct.lib, own_communicator(direct.lib, rank, gloo), torch, dev, "float32", 2)
    rt, rt_path = cudart()
    if rank == 0:
        print(json.dumps({"cudart": rt_path}), flush=True)

    def nccl_barrier() -> None:
        dist.all_reduce(flag)
        torch.cuda.synchronize()

    out = []
    for size in SIZES:
        count = size // 4
        send, recv = block.view(block.send, count, torch.float32), block.view(block.recv, count, torch.float32)
        calls = {"torch": direct.all_reduce(send, recv), "own": own.all_reduce(send, recv)}
        for c in calls.values():
            for _ in range(5):
                c()
        torch.cuda.synchronize()
        for variant in VARIANTS:
            nccl = own if "own" in variant else direct
            call = calls["own" if "own" in variant else "torch"]
            for rep in range(REPEATS):
                if variant == "raw_graph":
                    def both_barriers() -> None:
                        nccl_barrier()
                        dist.barrier(group=gloo)
                    wall, window, device = raw_window(rt, nccl, call, dev, both_barriers)
                    out.append({"rank": rank, "size": size, "variant": variant, "rep": rep, "start_ns": wall,
                                "window_us": round(window, 2), "device_us": round(device, 2)})
                    continue
                if variant.startswith("host"):
                    nccl_barrier()
                    dist.barrier(group=gloo)
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    wall = time.time_ns()
                    nccl.pinned = nccl.current_stream()
                    t0 = time.perf_counter()
                    start.record()
                    for _ in range(ITERS):
                        call()
                    end.record()
                    torch.cuda.synchronize()
                    window = (time.perf_counter() - t0) * 1e6 / ITERS
                    nccl.pinned = None
                    out.append({"rank": rank, "size": size, "variant": variant, "rep": rep, "start_ns": wall,
                                "window_us": round(window, 2), "device_us": round(start.elapsed_time(end) * 1e3 / ITERS, 2)})
                    continue
                side = torch.cuda.Stream(device=dev)
                side.wait_stream(torch.cuda.current_stream(dev))
                with torch.cuda.stream(side):
                    call()
                torch.cuda.current_stream(dev).wait_stream(side)
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, capture_error_mode="global" if variant == "torch_graph_global" else "thread_local"):
                    nccl.pinned = nccl.current_stream()
                    for _ in range(ITERS):
                        call()
                    nccl.pinned = None
                if variant != "as_is":
                    graph.replay()
                    torch.cuda.synchronize()
                nccl_barrier()
                if variant in ("warm_gloo", "own_comm", "torch_graph_global"):
                    dist.barrier(group=gloo)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                wall = time.time_ns()
                t0 = time.perf_counter()
                start.record()
                graph.replay()
                end.record()
                torch.cuda.synchronize()
                window = (time.perf_counter() - t0) * 1e6 / ITERS
                out.append({"rank": rank, "size": size, "variant": variant, "rep": rep, "start_ns": wall,
                            "window_us": round(window, 2), "device_us": round(start.elapsed_time(end) * 1e3 / ITERS, 2)})
                del graph
    rows = [None, None]
    dist.all_gather_object(rows, out, group=gloo)
    if rank == 0:
        for a, b in zip(*rows):
            skew = (b["start_ns"] - a["start_ns"]) / 1e3
            print(json.dumps({"size": a["size"], "variant": a["variant"], "rep": a["rep"], "skew_us(r1-r0)": round(skew, 1),
                              "window_us": [a["window_us"], b["window_us"]], "device_us": [a["device_us"], b["device_us"]]}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
