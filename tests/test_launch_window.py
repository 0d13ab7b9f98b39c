"""The compiled host window (envmatrix/rank/_launch_window.c, issue 16), called for real through ctypes.

libnccl and libcudart are the boundary: their functions are replaced by C-callable Python functions (ctypes
callbacks) that record what the compiled loop passes them and answer NCCL's and CUDA's codes. The C code, its
argument passing, the per-iteration buffer shift and the drain are the real ones.
"""

import ctypes
import shutil
import time
import types

import pytest

from envmatrix.rank.launch_window import CompiledWindows, extension_path
from envmatrix.rank.nccl_direct import BoundLaunch, DirectNccl

CUDA_NOT_READY = 600
P, SZ, I32 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
WITH_INT_FN = ctypes.CFUNCTYPE(I32, P, P, SZ, I32, I32, P, P)
GATHER_FN = ctypes.CFUNCTYPE(I32, P, P, SZ, I32, P, P)
P2P_FN = ctypes.CFUNCTYPE(I32, P, SZ, I32, I32, P, P)
GROUP_FN = ctypes.CFUNCTYPE(I32)
QUERY_FN = ctypes.CFUNCTYPE(I32, P)
ASYNC_FN = ctypes.CFUNCTYPE(I32, P, ctypes.POINTER(I32))


def _built_library():
    path = extension_path()
    if path is None:
        if shutil.which("cc") or shutil.which("gcc"):
            pytest.fail("a C compiler is here but the install built no envmatrix/rank/_launch_window extension")
        pytest.skip("no C compiler: the install could not build the compiled window (the engine uses its Python loop)")
    return ctypes.CDLL(path)


class FakeRuntime:
    """cudaStreamQuery and ncclCommGetAsyncError: the stream is busy ``busy`` more queries, or until ``busy_s``."""

    def __init__(self, busy=2, busy_s=0.0, query_error=0, async_error=0):
        self.busy, self.busy_s, self.query_error, self.async_error = busy, busy_s, query_error, async_error
        self.queries, self.async_checks, self.deadline = [], 0, None
        self.query = QUERY_FN(self._query)
        self.check_async = ASYNC_FN(self._async)

    def _query(self, stream):
        self.queries.append(stream)
        if self.query_error:
            return self.query_error
        if self.busy_s and self.deadline is None:
            self.deadline = time.perf_counter() + self.busy_s
        if self.deadline is not None and time.perf_counter() < self.deadline:
            return CUDA_NOT_READY
        if self.busy > 0:
            self.busy -= 1
            return CUDA_NOT_READY
        return 0

    def _async(self, comm, out):
        self.async_checks += 1
        out[0] = self.async_error
        return 0

    def windows(self):
        address = lambda fn: ctypes.cast(fn, ctypes.c_void_p).value
        return CompiledWindows(_built_library(), address(self.query), address(self.check_async))


def _direct(**fns):
    names = ("ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclSend", "ncclRecv",
             "ncclGroupStart", "ncclGroupEnd")
    lib = types.SimpleNamespace(**{n: fns.pop(n, GROUP_FN(lambda: 0)) for n in names}, **fns)
    lib.ncclGetErrorString = lambda code: b"unhandled system error"
    import torch

    return DirectNccl(lib, 0xC0FFEE, torch, torch.device("cpu"), "float32", 2)


def test_allreduce_window_launches_shifted_buffers_then_drains_the_stream():
    import torch

    calls = []
    allreduce = WITH_INT_FN(lambda *args: calls.append(args) or 0)
    runtime = FakeRuntime(busy=3)
    direct = _direct(ncclAllReduce=allreduce)
    send, recv = torch.zeros(64), torch.zeros(64)
    launch = direct.all_reduce(send[:4], recv[:4], (16, 3))  # 4 floats: 16 bytes a step, 3 steps fit
    per_op = runtime.windows().time_us(launch, 0x5EED, 7)
    assert len(calls) == 7 and per_op > 0
    base_s, base_r = send.data_ptr(), recv.data_ptr()
    assert [(c[0] - base_s, c[1] - base_r) for c in calls] == [(16 * (i % 3),) * 2 for i in range(7)]
    assert {c[2:] for c in calls} == {(4, 7, 0, 0xC0FFEE, 0x5EED)}  # count, float32, sum, comm, stream
    assert runtime.queries == [0x5EED] * 4 and runtime.async_checks == 3  # NCCL's async error checked while busy
    # the Python fallback shifts the same way: one rule for both loops
    python_calls = []
    fallback = BoundLaunch(direct, lambda *a: python_calls.append(a) or 0, "ncclAllReduce", launch.head,
                           stride=16, steps=3)
    for call in fallback.window(ctypes.c_void_p(0x5EED), 7):
        call()
    assert [(c[0].value, c[1].value) for c in python_calls] == [(c[0], c[1]) for c in calls]


def test_window_time_holds_the_drain_not_only_the_launches():
    import torch

    runtime = FakeRuntime(busy=0, busy_s=0.02)
    direct = _direct(ncclAllGather=GATHER_FN(lambda *args: 0))
    launch = direct.all_gather(torch.zeros(2), torch.zeros(4))
    per_op = runtime.windows().time_us(launch, 1, 10)
    assert per_op * 10 >= 0.02 * 1e6 * 0.95  # the 20 ms the stream stayed busy are inside the window


def test_alltoall_window_groups_one_send_and_receive_per_peer():
    import torch

    events = []
    send_fn = P2P_FN(lambda buf, n, dt, peer, comm, stream: events.append(("send", buf, n, peer)) or 0)
    recv_fn = P2P_FN(lambda buf, n, dt, peer, comm, stream: events.append(("recv", buf, n, peer)) or 0)
    start = GROUP_FN(lambda: events.append(("start",)) or 0)
    end = GROUP_FN(lambda: events.append(("end",)) or 0)
    direct = _direct(ncclSend=send_fn, ncclRecv=recv_fn, ncclGroupStart=start, ncclGroupEnd=end)
    send, recv = torch.zeros(32), torch.zeros(32)
    launch = direct.all_to_all(send[:8], recv[:8], (32, 4))  # 2 peers x 4 floats
    FakeRuntime(busy=0).windows().time_us(launch, 9, 2)
    s, r = send.data_ptr(), recv.data_ptr()
    one = lambda shift: [("start",), ("send", s + shift, 4, 0), ("recv", r + shift, 4, 0),
                         ("send", s + shift + 16, 4, 1), ("recv", r + shift + 16, 4, 1), ("end",)]
    assert events == one(0) + one(32)


def test_alltoall_is_nccls_own_collective_where_the_library_has_one():
    import torch

    calls = []
    native = GATHER_FN(lambda *args: calls.append(args) or 0)
    direct = _direct(ncclAlltoAll=native, ncclGroupStart=GROUP_FN(lambda: calls.append("group") or 0))
    send, recv = torch.zeros(32), torch.zeros(32)
    launch = direct.all_to_all(send[:8], recv[:8], (32, 4))
    assert launch.what == "ncclAlltoAll"
    FakeRuntime(busy=0).windows().time_us(launch, 9, 2)
    s, r = send.data_ptr(), recv.data_ptr()
    # nccl-tests 2.19.6 on NCCL >= 2.28: ncclAlltoAll(send, recv, count per peer, type, comm, stream)
    assert calls == [(s, r, 4, 7, 0xC0FFEE, 9), (s + 32, r + 32, 4, 7, 0xC0FFEE, 9)]


@pytest.mark.parametrize("failure, message", [
    ({"launch_rc": 5}, "ncclReduceScatter: NCCL error 5: unhandled system error"),
    ({"async_error": 6}, "ncclReduceScatter: NCCL error 6: unhandled system error"),
    ({"query_error": 700}, "ncclReduceScatter: cudaStreamQuery: CUDA error 700"),
])
def test_window_names_the_first_error_and_stops_launching(failure, message):
    import torch

    calls = []
    rc = failure.get("launch_rc", 0)
    scatter = WITH_INT_FN(lambda *args: calls.append(args) or (rc if len(calls) == 3 else 0))
    runtime = FakeRuntime(busy=1, query_error=failure.get("query_error", 0), async_error=failure.get("async_error", 0))
    launch = _direct(ncclReduceScatter=scatter).reduce_scatter(torch.zeros(8), torch.zeros(4))
    with pytest.raises(RuntimeError, match=message):
        runtime.windows().time_us(launch, 1, 10)
    assert len(calls) == (3 if rc else 10)  # a failed launch ends the window there


def test_graph_window_launches_the_graph_then_drains_and_divides_by_every_captured_operation():
    launched = []
    graph_launch = ctypes.CFUNCTYPE(I32, P, P)(lambda exe, stream: launched.append((exe, stream)) or 0)
    runtime = FakeRuntime(busy=0, busy_s=0.01)
    per_op = runtime.windows().graph_time_us(graph_launch, ctypes.c_void_p(0xE7E), ctypes.c_void_p(0xC0), 0x5EED, 2, 20)
    assert launched == [(0xE7E, 0x5EED)] * 2 and runtime.queries[-1] == 0x5EED
    assert per_op * 40 >= 0.01 * 1e6 * 0.95  # 2 launches x 20 captured operations share the drained window
    failing = ctypes.CFUNCTYPE(I32, P, P)(lambda exe, stream: 900)
    with pytest.raises(RuntimeError, match="cudaGraphLaunch/cudaStreamQuery: CUDA error 900"):
        FakeRuntime(busy=0).windows().graph_time_us(failing, 1, 2, 3, 1, 20)
