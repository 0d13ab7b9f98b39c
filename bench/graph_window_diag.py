"""Issue 16 diagnosis: where envmatrix's graph-mode window loses ~4 us per small allreduce against nccl-tests -G 1.

Run on the 2-GPU box, one process per GPU (bench/h200x2_graph_window.sh):
    python -m torch.distributed.run --nproc-per-node 2 bench/graph_window_diag.py
Each variant captures ITERS direct ncclAllReduce launches (envmatrix's own path: nccl_direct on torch's
communicator, ncclMemAlloc buffers) into one CUDA graph, then times one replay with the host clock, as
envmatrix's ``graph`` timing does. Printed per rank: the window's start on the shared wall clock (both ranks run on
one host, so the difference is the skew the barrier left), the window in us per op, and the device time between
CUDA events around the replay. Variants: ``as_is`` (torch all_reduce barrier, first replay timed),
``warm`` (one untimed replay first), ``warm_gloo`` (plus a gloo barrier over the host after the NCCL one).
"""

from __future__ import annotations

import json
import os
import time

import torch
import torch.distributed as dist

from envmatrix.rank.nccl_direct import arena, attach

ITERS, REPEATS = 20, 5
SIZES = (8, 4096, 262144)


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

    def nccl_barrier() -> None:
        dist.all_reduce(flag)
        torch.cuda.synchronize()

    out = []
    for size in SIZES:
        count = size // 4
        send, recv = block.view(block.send, count, torch.float32), block.view(block.recv, count, torch.float32)
        call = direct.all_reduce(send, recv)
        for _ in range(5):
            call()
        torch.cuda.synchronize()
        for variant in ("as_is", "warm", "warm_gloo"):
            for rep in range(REPEATS):
                side = torch.cuda.Stream(device=dev)
                side.wait_stream(torch.cuda.current_stream(dev))
                with torch.cuda.stream(side):
                    call()
                torch.cuda.current_stream(dev).wait_stream(side)
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                    direct.pinned = direct.current_stream()
                    for _ in range(ITERS):
                        call()
                    direct.pinned = None
                if variant != "as_is":
                    graph.replay()
                    torch.cuda.synchronize()
                nccl_barrier()
                if variant == "warm_gloo":
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
