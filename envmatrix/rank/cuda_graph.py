"""Rank side: a CUDA graph captured and launched through the CUDA runtime itself, as nccl-tests ``-G`` does.

Why: on 2xH200 (benchmarks/fidelity_h200.md, issue 16) the same 20 direct ncclAllReduce launches captured with
``torch.cuda.graph`` cost 9-11 us per operation on the GPU at 8 B, captured with ``cudaStreamBeginCapture`` on a
plain stream and launched with ``cudaGraphLaunch`` 6.6-7.3 us, which is nccl-tests' ``-G 1`` figure (6.4-7.0 us)
on the same box, library and communicator; torch's capture mode (thread-local or global) made no difference.
Only the direct launches (nccl_direct.py) can be captured this way: torch's collectives run on c10d's own
streams, which only ``torch.cuda.graph`` joins into the capture.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any, Callable, Optional

from envmatrix.rank.nccl_direct import mapped_library

# cudaStreamCaptureModeThreadLocal: c10d's watchdog thread may query its events while this thread captures
_CAPTURE_THREAD_LOCAL = 1
# cudaGraphNodeType, in the runtime's order: a graph of n collectives that holds anything but n kernels is not the
# graph nccl-tests -G times (issue 40 compares the census of both)
_NODE_TYPES = ("kernel", "memcpy", "memset", "host", "graph", "empty", "wait_event", "event_record",
               "ext_semas_signal", "ext_semas_wait", "mem_alloc", "mem_free", "conditional")


class RuntimeGraphs:
    def __init__(self, lib: Any) -> None:
        self.lib = lib
        lib.cudaStreamBeginCapture.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.cudaStreamEndCapture.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
        lib.cudaGraphInstantiate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_ulonglong]
        lib.cudaGraphLaunch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
        lib.cudaGraphExecDestroy.argtypes = [ctypes.c_void_p]
        lib.cudaGraphDestroy.argtypes = [ctypes.c_void_p]
        lib.cudaGetErrorString.restype = ctypes.c_char_p
        lib.cudaGraphGetNodes.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        lib.cudaGraphNodeGetType.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]

    def _check(self, rc: int, what: str) -> None:
        if rc:
            raise RuntimeError(f"{what}: CUDA error {rc}: {self.lib.cudaGetErrorString(rc).decode()}")

    def capture(self, stream: ctypes.c_void_p, body: Callable[[], None]) -> "CapturedGraph":
        """Everything ``body`` launches on ``stream`` becomes one instantiated graph. Not uploaded here: its first
        launch uploads it inside the timed window, as in nccl-tests' ``-G 1`` window (an upload done beforehand made
        small sizes 3-14 % faster than nccl-tests on 2xH200, benchmarks/fidelity_h200.md)."""
        lib, graph = self.lib, ctypes.c_void_p()
        self._check(lib.cudaStreamBeginCapture(stream, _CAPTURE_THREAD_LOCAL), "cudaStreamBeginCapture")
        try:
            body()
        finally:
            ended = lib.cudaStreamEndCapture(stream, ctypes.byref(graph))
        self._check(ended, "cudaStreamEndCapture")
        exe = ctypes.c_void_p()
        rc = lib.cudaGraphInstantiate(ctypes.byref(exe), graph, 0)
        if rc:
            lib.cudaGraphDestroy(graph)
            self._check(rc, "cudaGraphInstantiate")
        return CapturedGraph(self, stream, graph, exe)


class CapturedGraph:
    def __init__(self, graphs: RuntimeGraphs, stream: ctypes.c_void_p, graph: ctypes.c_void_p, exe: ctypes.c_void_p) -> None:
        self.graphs, self.stream, self.graph, self.exe = graphs, stream, graph, exe

    def launch(self) -> None:
        self.graphs._check(self.graphs.lib.cudaGraphLaunch(self.exe, self.stream), "cudaGraphLaunch")

    def synchronize(self) -> None:
        self.graphs._check(self.graphs.lib.cudaStreamSynchronize(self.stream), "cudaStreamSynchronize")

    def census(self) -> str:
        """The captured graph's nodes by type, e.g. ``kernel:20``; empty when the runtime cannot say."""
        lib, count = self.graphs.lib, ctypes.c_size_t()
        if lib.cudaGraphGetNodes(self.graph, None, ctypes.byref(count)):
            return ""
        nodes = (ctypes.c_void_p * count.value)()
        if lib.cudaGraphGetNodes(self.graph, nodes, ctypes.byref(count)):
            return ""
        kinds: dict[str, int] = {}
        for node in nodes[: count.value]:
            kind = ctypes.c_int()
            if lib.cudaGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)):
                return ""
            name = _NODE_TYPES[kind.value] if 0 <= kind.value < len(_NODE_TYPES) else f"type{kind.value}"
            kinds[name] = kinds.get(name, 0) + 1
        return ",".join(f"{name}:{n}" for name, n in sorted(kinds.items()))

    def close(self) -> None:
        self.graphs.lib.cudaGraphExecDestroy(self.exe)
        self.graphs.lib.cudaGraphDestroy(self.graph)


@functools.cache
def runtime_graphs() -> Optional[RuntimeGraphs]:
    """The CUDA runtime torch loaded, or None (a static cudart, a missing symbol): then torch.cuda.graph is used."""
    path = mapped_library("/libcudart.so")  # torch's copy: its stream handles are the ones torch's streams hold
    if path is None:
        return None
    try:
        return RuntimeGraphs(ctypes.CDLL(path))
    except (OSError, AttributeError):
        return None
