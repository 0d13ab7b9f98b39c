"""Rank side: nccl-tests' default timed window run by compiled code (``_launch_window.c``), issue 16.

Why: the ``host`` timing's window holds ``iters`` launches and the stream's drain, and at small messages the
host cost of each launch is what it measures. From a Python loop of ctypes calls each launch cost 1.2-3 us more
than from nccl-tests' C loop on 2xH200 (benchmarks/fidelity_h200.md), which no Python-side change removed. The C
window calls the very functions torch loaded (libnccl's collectives, libcudart's ``cudaStreamQuery``) by address.

The library is an optional extension built at install time (setup.py); without a C compiler there it is absent,
``compiled_windows`` returns None and the engine runs the Python loop, recording ``loop: python`` per row.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
from typing import Any, Optional

from envmatrix.rank.nccl_direct import ALLTOALL, GATHER, WITH_INT, BoundLaunch, mapped_library

_EXTENSION = "envmatrix.rank._launch_window"


class _Drain(ctypes.Structure):
    _fields_ = [("stream_query", ctypes.c_void_p), ("comm_async_error", ctypes.c_void_p)]


def _address(fn: Any) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


def _value(arg: Any) -> int:
    return int(getattr(arg, "value", arg) or 0)


class CompiledWindows:
    """The window functions of the extension, bound to one process's libnccl and libcudart."""

    def __init__(self, lib: Any, stream_query: int, comm_async_error: int) -> None:
        self.lib = lib
        self.drain = _Drain(stream_query, comm_async_error)
        ns, ptr, size, i32 = ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        drain = ctypes.POINTER(_Drain)
        lib.em_window_with_int.argtypes = [drain, ptr, ptr, ptr, size, i32, i32, ptr, ptr, size, i32, i32, ns]
        lib.em_window_gather.argtypes = [drain, ptr, ptr, ptr, size, i32, ptr, ptr, size, i32, i32, ns]
        lib.em_window_alltoall.argtypes = [drain, ptr, ptr, ptr, ptr, ptr, ptr, size, size, i32, i32, ptr, ptr, size,
                                           i32, i32, ns]
        lib.em_window_graph.argtypes = [drain, ptr, ptr, ptr, ptr, i32, ns]

    def graph_time_us(self, graph_launch: Any, graph_exec: Any, comm: Any, stream: Any, launches: int, ops: int) -> float:
        """nccl-tests -G's window: ``launches`` cudaGraphLaunch calls of ``graph_exec`` and the drain, in microseconds
        per operation (``ops`` captured operations per launch)."""
        elapsed = ctypes.c_int64()
        rc = self.lib.em_window_graph(ctypes.byref(self.drain), _address(graph_launch), _value(graph_exec),
                                      _value(comm), _value(stream), launches, ctypes.byref(elapsed))
        if rc > 0:
            raise RuntimeError(f"graph window: NCCL error {rc}")
        if rc < 0:
            raise RuntimeError(f"graph window: cudaGraphLaunch/cudaStreamQuery: CUDA error {-rc}")
        return elapsed.value / 1e3 / (launches * ops)

    def time_us(self, launch: BoundLaunch, stream: int, iters: int) -> float:
        """One window of ``iters`` launches on ``stream`` and its drain: microseconds per operation.

        Raises RuntimeError naming the NCCL or CUDA error, as the Python loop's launches do.
        """
        elapsed = ctypes.c_int64()
        head = [_value(a) for a in launch.head]
        shift = (launch.stride, launch.steps, iters, ctypes.byref(elapsed))
        drain = ctypes.byref(self.drain)
        if launch.shape == WITH_INT:
            send, recv, count, dtype, op_or_root, comm = head
            rc = self.lib.em_window_with_int(drain, _address(launch.fn), send, recv, count, dtype, op_or_root, comm,
                                             stream, *shift)
        elif launch.shape == GATHER:
            send, recv, count, dtype, comm = head
            rc = self.lib.em_window_gather(drain, _address(launch.fn), send, recv, count, dtype, comm, stream, *shift)
        elif launch.shape == ALLTOALL:
            send, recv, count, dtype, step, comm = head
            nccl = launch.direct.lib
            rc = self.lib.em_window_alltoall(drain, _address(nccl.ncclGroupStart), _address(nccl.ncclGroupEnd),
                                             _address(nccl.ncclSend), _address(nccl.ncclRecv), send, recv, count,
                                             step, dtype, launch.direct.world, comm, stream, *shift)
        else:
            raise ValueError(f"no compiled window for launch shape {launch.shape!r}")
        if rc > 0:
            launch.check(rc)
        if rc < 0:
            raise RuntimeError(f"{launch.what}: cudaStreamQuery: CUDA error {-rc}")
        return elapsed.value / 1e3 / iters


def extension_path() -> Optional[str]:
    """Where the built extension lies, or None when the install built none (no C compiler)."""
    spec = importlib.util.find_spec(_EXTENSION)
    return spec.origin if spec is not None and spec.origin else None


@functools.cache
def compiled_windows(nccl: Any) -> Optional[CompiledWindows]:
    """The compiled windows bound to ``nccl`` (the libnccl CDLL) and torch's libcudart, or None if any is missing."""
    path, cudart_path = extension_path(), mapped_library("/libcudart.so")
    if path is None or cudart_path is None:
        return None
    try:
        cudart = ctypes.CDLL(cudart_path)
        return CompiledWindows(ctypes.CDLL(path), _address(cudart.cudaStreamQuery), _address(nccl.ncclCommGetAsyncError))
    except (OSError, AttributeError):
        return None
