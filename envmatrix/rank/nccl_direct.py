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
import functools
from typing import Any, Callable, Optional

# ncclDataType_t and ncclRedOp_t values from nccl.h (stable since NCCL 2.0; bfloat16 since 2.10)
_NCCL_DTYPE = {"float32": 7, "float16": 6, "bfloat16": 9, "int32": 2}
_NCCL_SUM = 0


def mapped_library(fragment: str) -> Optional[str]:
    """The path of a library this process already mapped (torch's copy), so ctypes binds the very same one."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if line.strip() else ""
                if fragment in path:
                    return path
    except OSError:
        return None
    return None


class DirectNccl:
    """Bound launches: every argument but the stream is converted once per buffer set, so a timed call costs
    one ctypes call (what nccl-tests' C loop costs, plus the foreign-call overhead)."""

    def __init__(self, lib: Any, comm: int, torch: Any, device: Any, dtype: str, world: int) -> None:
        self.lib, self.comm, self.torch, self.device = lib, ctypes.c_void_p(comm), torch, device
        self.dtype, self.dtype_name, self.world = ctypes.c_int(_NCCL_DTYPE[dtype]), dtype, world
        self._meeting: Optional[tuple] = None  # meet()'s flag and its bound allreduce
        # set by the timers around a window (the capture stream inside a CUDA graph capture)
        self.pinned: Optional[ctypes.c_void_p] = None
        for fn in ("ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclSend", "ncclRecv",
                   "ncclGroupStart", "ncclGroupEnd", "ncclGetErrorString"):
            getattr(lib, fn)  # fail in attach(), not mid-window
        lib.ncclGetErrorString.restype = ctypes.c_char_p

    def current_stream(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(self.torch.cuda.current_stream(self.device).cuda_stream)

    def _stream(self) -> ctypes.c_void_p:
        return self.pinned if self.pinned is not None else self.current_stream()

    def _fail(self, rc: int, what: str) -> None:
        raise RuntimeError(f"{what}: NCCL error {rc}: {self.lib.ncclGetErrorString(rc).decode()}")

    def _bound(self, fn: Any, what: str, *head: Any, shape: str, shift: tuple[int, int]) -> "BoundLaunch":
        return BoundLaunch(self, fn, what, head, shape=shape, stride=shift[0], steps=shift[1])

    @staticmethod
    def _ptr(t: Any, offset: int = 0) -> ctypes.c_void_p:
        return ctypes.c_void_p(t.data_ptr() + offset)

    # shift: (stride in bytes, steps) of nccl-tests' per-iteration buffer shift (BoundLaunch), (0, 1) for none
    def all_reduce(self, send: Any, recv: Any, shift: tuple[int, int] = (0, 1)) -> "BoundLaunch":
        return self._bound(self.lib.ncclAllReduce, "ncclAllReduce", self._ptr(send), self._ptr(recv),
                           ctypes.c_size_t(send.numel()), self.dtype, ctypes.c_int(_NCCL_SUM), self.comm,
                           shape=WITH_INT, shift=shift)

    def all_gather(self, send: Any, recv: Any, shift: tuple[int, int] = (0, 1)) -> "BoundLaunch":
        return self._bound(self.lib.ncclAllGather, "ncclAllGather", self._ptr(send), self._ptr(recv),
                           ctypes.c_size_t(send.numel()), self.dtype, self.comm, shape=GATHER, shift=shift)

    def reduce_scatter(self, send: Any, recv: Any, shift: tuple[int, int] = (0, 1)) -> "BoundLaunch":
        return self._bound(self.lib.ncclReduceScatter, "ncclReduceScatter", self._ptr(send), self._ptr(recv),
                           ctypes.c_size_t(recv.numel()), self.dtype, ctypes.c_int(_NCCL_SUM), self.comm,
                           shape=WITH_INT, shift=shift)

    def broadcast(self, send: Any, recv: Any, root: int, shift: tuple[int, int] = (0, 1)) -> "BoundLaunch":
        return self._bound(self.lib.ncclBroadcast, "ncclBroadcast", self._ptr(send), self._ptr(recv),
                           ctypes.c_size_t(send.numel()), self.dtype, ctypes.c_int(root), self.comm,
                           shape=WITH_INT, shift=shift)

    def meet(self, stream: ctypes.c_void_p, synchronize: Callable[[], None]) -> None:
        """A one-element allreduce on ``stream``, then ``synchronize``: the ranks leave together.

        Why: after torch's all_reduce the last rank to arrive still does torch's bookkeeping after its launch while
        the others already start their clocks; a timed window of 20 small launches then carries that skew (0.5-2 us
        per operation on 2xH200, benchmarks/fidelity_h200.md), where nccl-tests' MPI barrier leaves none.
        """
        if self._meeting is None:
            flag = self.torch.zeros(1, dtype=getattr(self.torch, self.dtype_name), device=self.device)
            self._meeting = (flag, self.all_reduce(flag, flag))
        launch = self._meeting[1]
        launch.check(launch.on(stream)())
        synchronize()

    def all_to_all(self, send: Any, recv: Any, shift: tuple[int, int] = (0, 1)) -> "BoundLaunch":
        """What nccl-tests' alltoall launches: ``ncclAlltoAll`` where the library has it (NCCL >= 2.28; nccl-tests
        2.19.6 calls it there), else one group of a send and a receive per peer (its fall-through)."""
        chunk = send.numel() // self.world
        n, lib, world = ctypes.c_size_t(chunk), self.lib, self.world
        native = getattr(lib, "ncclAlltoAll", None)
        if native is not None:
            # ncclAlltoAll(sendbuff, recvbuff, count per peer, datatype, comm, stream): ncclAllGather's shape
            return self._bound(native, "ncclAlltoAll", self._ptr(send), self._ptr(recv), n, self.dtype, self.comm,
                               shape=GATHER, shift=shift)
        step = chunk * send.element_size()
        peers_at: dict[tuple[int, int], list] = {}  # per shifted base: each peer's bound pointers, made once

        def grouped(send_at: ctypes.c_void_p, recv_at: ctypes.c_void_p, count: ctypes.c_size_t, dtype: ctypes.c_int,
                    step_bytes: ctypes.c_size_t, comm: ctypes.c_void_p, stream: ctypes.c_void_p) -> int:
            key = (send_at.value, recv_at.value)
            if key not in peers_at:
                peers_at[key] = [(ctypes.c_void_p(key[0] + p * step_bytes.value),
                                  ctypes.c_void_p(key[1] + p * step_bytes.value), ctypes.c_int(p)) for p in range(world)]
            rc = lib.ncclGroupStart()
            for out, into, peer in peers_at[key]:
                rc = rc or lib.ncclSend(out, count, dtype, peer, comm, stream)
                rc = rc or lib.ncclRecv(into, count, dtype, peer, comm, stream)
            return lib.ncclGroupEnd() or rc

        return self._bound(grouped, "ncclSend/ncclRecv group", self._ptr(send), self._ptr(recv), n, self.dtype,
                           ctypes.c_size_t(step), self.comm, shape=ALLTOALL, shift=shift)


# What a BoundLaunch's head holds after the two buffers (the compiled window has one function per shape):
WITH_INT = "with_int"  # count, datatype, op or root, comm (ncclAllReduce, ncclReduceScatter, ncclBroadcast)
GATHER = "gather"  # count, datatype, comm (ncclAllGather, ncclAlltoAll)
ALLTOALL = "alltoall"  # count per peer, datatype, bytes between peers, comm (a group of ncclSend/ncclRecv)


class BoundLaunch:
    """One collective with every argument but the stream converted once.

    ``head`` starts with the send and receive buffers; launch ``i`` of a window uses them ``(i % steps) * stride``
    bytes further, as nccl-tests' startColl shifts its buffers per iteration "to avoid cache effects": a window that
    launches on the same bytes every time can find them in the GPU's L2 cache (50 MB on H200) where nccl-tests
    does not.
    """

    def __init__(self, direct: DirectNccl, fn: Callable[..., int], what: str, head: tuple, shape: str = WITH_INT,
                 stride: int = 0, steps: int = 1) -> None:
        self.direct, self.fn, self.what, self.head = direct, fn, what, head
        self.shape, self.stride, self.steps = shape, stride, max(1, steps)

    def __call__(self, iteration: int = 0) -> None:
        self.check(self.on(self.direct._stream(), iteration)())

    def on(self, stream: ctypes.c_void_p, iteration: int = 0) -> Callable[[], int]:
        """Launch ``iteration`` with its stream bound too, returning NCCL's code: a timed loop pays one foreign call
        per launch and no Python frame of ours (about 1 us per launch less on 2xH200, benchmarks/fidelity_h200.md)."""
        shift = (iteration % self.steps) * self.stride
        head = self.head
        if shift:
            head = (ctypes.c_void_p(head[0].value + shift), ctypes.c_void_p(head[1].value + shift), *head[2:])
        return functools.partial(self.fn, *head, stream)

    def window(self, stream: ctypes.c_void_p, iters: int) -> list[Callable[[], int]]:
        """The ``iters`` launches of one timed window, bound before its clock starts."""
        bound = [self.on(stream, i) for i in range(min(iters, self.steps))]
        return [bound[i % len(bound)] for i in range(iters)]

    def check(self, rc: int) -> None:
        if rc:
            self.direct._fail(rc, self.what)


class NcclMemBlock:
    """Device memory from ``ncclMemAlloc``, what nccl-tests (>= 2.19 headers) allocates its buffers with.

    Why: NCCL registers such (cuMem) buffers for zero-copy transfers when a graph is captured, as it does for
    nccl-tests -G; torch's caching allocator hands out cudaMalloc memory, which it does not. Torch sees the
    block through ``__cuda_array_interface__`` (no copy); the block is never freed before the process exits,
    as nccl-tests keeps its buffers for the whole sweep.
    """

    def __init__(self, lib: Any, nbytes: int) -> None:
        ptr = ctypes.c_void_p()
        rc = lib.ncclMemAlloc(ctypes.byref(ptr), ctypes.c_size_t(nbytes))
        if rc or not ptr.value:
            raise RuntimeError(f"ncclMemAlloc({nbytes}): NCCL error {rc}")
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr.value, False),
                                         "strides": None, "version": 3, "stream": None}


class Arena:
    """One send and one receive block of the sweep's maximum size (nccl-tests' -e, its ``maxbytes``); every size
    starts at their first bytes (nccl-tests' layout), and a window's launches step through them (BenchContext.shift)."""

    def __init__(self, send: Any, recv: Any, span: int = 0) -> None:
        self.send, self.recv = send, recv  # uint8 tensors over NcclMemBlocks
        self.span = span or send.numel()  # the bytes nccl-tests' per-iteration shift divides: maxbytes

    def view(self, block: Any, count: int, dtype: Any) -> Any:
        itemsize = block.new_empty(0, dtype=dtype).element_size()
        return block[: count * itemsize].view(dtype)


def arena(direct: DirectNccl, nbytes: int) -> Optional[Arena]:
    """ncclMemAlloc'd buffers for the direct launches, or None (then torch's allocator is used, recorded per row)."""
    torch = direct.torch
    try:
        raw = [NcclMemBlock(direct.lib, max(nbytes, 512)) for _ in range(2)]
        blocks = [torch.as_tensor(r, device=direct.device) for r in raw]
        # as_tensor copies when it places the memory on another device: then these are not nccl-tests' buffers
        if any(b.data_ptr() != r.__cuda_array_interface__["data"][0] or b.dtype != torch.uint8 for b, r in zip(blocks, raw)):
            return None
        return Arena(*blocks, span=nbytes)
    except Exception:  # an older libnccl without ncclMemAlloc, a torch that cannot wrap it: torch's buffers
        return None


def attach(dist: Any, torch: Any, device: Any, dtype: str, world: int) -> Optional[DirectNccl]:
    """A DirectNccl on torch's default NCCL group, or None when any piece is missing (then torch's calls are used).

    Call after a first collective: torch creates its communicator lazily.
    """
    if getattr(device, "type", "") != "cuda" or dtype not in _NCCL_DTYPE:
        return None
    try:
        group = dist.distributed_c10d._get_default_group()
        comm = int(group._get_backend(device)._comm_ptr())
        path = mapped_library("/libnccl.so")
        if not comm or not path:
            return None
        return DirectNccl(ctypes.CDLL(path), comm, torch, device, dtype, world)
    except Exception:  # any missing piece: fall back to torch's launch path, recorded per row
        return None
