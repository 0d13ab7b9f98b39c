"""Rank side: NCCL collectives launched straight into the libnccl torch loaded, on torch's own communicator.

Why: torch.distributed's Python and C++ launch path costs more host time per call than nccl-tests' C
loop, and at small messages nccl-tests' host-clock window is bound by that launch cost, so timing
through torch would report a different number than nccl-tests on the same GPUs and library. ctypes
calls into the very library and communicator torch uses remove only torch's layer: NCCL's own
launch cost stays in the window, as in nccl-tests (issue 16). Anything unavailable (no NCCL group,
a torch without ``_comm_ptr``, a library that cannot be located) makes ``attach`` return None and the
engine falls back to torch's calls; every bench row records which launch path it used.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional

# ncclDataType_t and ncclRedOp_t values from nccl.h (stable since NCCL 2.0; bfloat16 since 2.10)
_NCCL_DTYPE = {"float32": 7, "float16": 6, "bfloat16": 9, "int32": 2}
_NCCL_SUM = 0


def _loaded_libnccl() -> Optional[str]:
    """The path of the libnccl this process already mapped (torch's), so ctypes binds the same copy."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if line.strip() else ""
                if "/libnccl.so" in path:
                    return path
    except OSError:
        return None
    return None


class DirectNccl:
    def __init__(self, lib: Any, comm: int, torch: Any, device: Any, dtype: str, world: int) -> None:
        self.lib, self.comm, self.torch, self.device = lib, ctypes.c_void_p(comm), torch, device
        self.dtype, self.world = ctypes.c_int(_NCCL_DTYPE[dtype]), world
        for fn in ("ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclSend", "ncclRecv",
                   "ncclGroupStart", "ncclGroupEnd", "ncclGetErrorString"):
            getattr(lib, fn)  # fail in attach(), not mid-window
        lib.ncclGetErrorString.restype = ctypes.c_char_p

    def _stream(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(self.torch.cuda.current_stream(self.device).cuda_stream)

    def _ok(self, rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what}: NCCL error {rc}: {self.lib.ncclGetErrorString(rc).decode()}")

    @staticmethod
    def _ptr(t: Any) -> ctypes.c_void_p:
        return ctypes.c_void_p(t.data_ptr())

    def all_reduce(self, send: Any, recv: Any) -> None:
        self._ok(self.lib.ncclAllReduce(self._ptr(send), self._ptr(recv), ctypes.c_size_t(send.numel()), self.dtype,
                                        ctypes.c_int(_NCCL_SUM), self.comm, self._stream()), "ncclAllReduce")

    def all_gather(self, send: Any, recv: Any) -> None:
        self._ok(self.lib.ncclAllGather(self._ptr(send), self._ptr(recv), ctypes.c_size_t(send.numel()), self.dtype,
                                        self.comm, self._stream()), "ncclAllGather")

    def reduce_scatter(self, send: Any, recv: Any) -> None:
        self._ok(self.lib.ncclReduceScatter(self._ptr(send), self._ptr(recv), ctypes.c_size_t(recv.numel()), self.dtype,
                                            ctypes.c_int(_NCCL_SUM), self.comm, self._stream()), "ncclReduceScatter")

    def broadcast(self, send: Any, recv: Any, root: int) -> None:
        self._ok(self.lib.ncclBroadcast(self._ptr(send), self._ptr(recv), ctypes.c_size_t(send.numel()), self.dtype,
                                        ctypes.c_int(root), self.comm, self._stream()), "ncclBroadcast")

    def all_to_all(self, send: Any, recv: Any) -> None:
        # what nccl-tests' alltoall does: one grouped send and receive per peer
        chunk = send.numel() // self.world
        step = chunk * send.element_size()
        stream, n = self._stream(), ctypes.c_size_t(chunk)
        self._ok(self.lib.ncclGroupStart(), "ncclGroupStart")
        for peer in range(self.world):
            self._ok(self.lib.ncclSend(ctypes.c_void_p(send.data_ptr() + peer * step), n, self.dtype, ctypes.c_int(peer),
                                       self.comm, stream), "ncclSend")
            self._ok(self.lib.ncclRecv(ctypes.c_void_p(recv.data_ptr() + peer * step), n, self.dtype, ctypes.c_int(peer),
                                       self.comm, stream), "ncclRecv")
        self._ok(self.lib.ncclGroupEnd(), "ncclGroupEnd")


def attach(dist: Any, torch: Any, device: Any, dtype: str, world: int) -> Optional[DirectNccl]:
    """A DirectNccl on torch's default NCCL group, or None when any piece is missing (then torch's calls are used).

    Call after a first collective: torch creates its communicator lazily.
    """
    if getattr(device, "type", "") != "cuda" or dtype not in _NCCL_DTYPE:
        return None
    try:
        group = dist.distributed_c10d._get_default_group()
        comm = int(group._get_backend(device)._comm_ptr())
        path = _loaded_libnccl()
        if not comm or not path:
            return None
        return DirectNccl(ctypes.CDLL(path), comm, torch, device, dtype, world)
    except Exception:  # any missing piece: fall back to torch's launch path, recorded per row
        return None
