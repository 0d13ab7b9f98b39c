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

import torch

import c_loop_diag
from c_launch_loop import compile_loop
from c_loop_diag import ITERS, as_int, c_window, print_rank_means, start_rank, sweep
from envmatrix.rank.bench_engine import _timed_host
from envmatrix.rank.nccl_direct import mapped_library

c_loop_diag.REPEATS = 7
c_loop_diag.SIZES = (8, 512, 4096, 32768, 262144)


def cudart_stream() -> ctypes.c_void_p:
    lib = ctypes.CDLL(mapped_library("/libcudart.so"))
    handle = ctypes.c_void_p()
    rc = lib.cudaStreamCreateWithFlags(ctypes.byref(handle), ctypes.c_uint(1))  # cudaStreamNonBlocking
    if rc:
        raise RuntimeError(f"cudaStreamCreateWithFlags: CUDA error {rc}")
    return handle


def main() -> None:
    c = start_rank()
    loop = compile_loop(c.rank)
    own = torch.cuda.Stream(device=c.device)
    streams = {"default": torch.cuda.current_stream(c.device), "torch_nb": own,
               "cudart_nb": torch.cuda.ExternalStream(as_int(cudart_stream()), device=c.device)}
    print(json.dumps({"rank": c.rank, "streams": {k: v.cuda_stream for k, v in streams.items()},
                      "torch_stream_priority": own.priority}), flush=True)

    def engine_on(stream):
        def window(name, run, count):
            c.launch_stream = stream
            return _timed_host(c, run, ITERS)
        return window

    def c_loop_on(stream):
        return lambda name, run, count: c_window(c, loop, name, run.direct_launch, stream.cuda_stream, count)

    variants = {f"engine@{where}": engine_on(s) for where, s in streams.items()}
    variants.update({f"c_loop@{where}": c_loop_on(s) for where, s in streams.items()})
    print_rank_means(c, sweep(c, variants))


if __name__ == "__main__":
    main()
