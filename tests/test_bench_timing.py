"""Timing-mode selection, metric records and table labels (issue 16; issue 22 item 7 presentation)."""

import pytest

from envmatrix.bench.aggregate import aggregate_rows
from envmatrix.bench.timing import DEFAULT_TIMING, TIMINGS, check_timing
from envmatrix.errors import ConfigError
from envmatrix.rank.collective_timer import effective_timing
from envmatrix.probes.builtin import normalize_bench
from envmatrix.reporting.bench_tables import busbw_by_size, collective_title, nccl_tests_rows, timing_label


def test_default_is_nccl_tests_host_window_and_hiding_modes_say_so():
    assert DEFAULT_TIMING == "host" and normalize_bench(True, "bench", "gloo")["timing"] == "host"
    assert set(TIMINGS) == {"host", "host-torch", "graph", "device-hides-launch", "blocking"}
    assert "torch.distributed" in TIMINGS["host-torch"] and "libnccl" in TIMINGS["host"]
    assert "hides host launch" in TIMINGS["device-hides-launch"] and "-G" in TIMINGS["graph"]


@pytest.mark.parametrize("timing", ["graph", "device-hides-launch"])
def test_cuda_only_timings_refused_on_gloo_with_allowed_list(timing):
    assert check_timing(timing, "nccl", "bench") == timing
    with pytest.raises(ConfigError, match=rf"bench\.timing: '{timing}' needs CUDA .*allowed here: host, blocking"):
        normalize_bench({"timing": timing}, "bench", "gloo")


def test_unknown_timing_lists_every_mode():
    with pytest.raises(ConfigError, match="'batched' not allowed; allowed: host, host-torch, graph, device-hides-launch, blocking"):
        check_timing("batched", "nccl", "x.bench")


def test_dependent_patterns_always_timed_call_by_call():
    assert effective_timing("graph", "allreduce") == "graph"
    assert effective_timing("host", "ps_sharded") == "blocking"
    assert effective_timing("blocking", "alltoall") == "blocking"


def _rank_row(collective, size, t, timing="host"):
    return {"collective": collective, "size_bytes": size, "count": size // 4, "dtype": "float32", "time_us": t,
            "time_min_us": t, "time_median_us": t, "time_max_us": t, "wrong": 0, "iters": 20, "timing": timing}


def test_aggregate_keeps_c_order_records_timing_and_time_within_min_max():
    rows = [_rank_row(c, s, t) for c in ("alltoall", "allreduce") for s in (4096, 64) for t in (10.0, 14.0)]
    out = aggregate_rows(rows, 2)
    assert [(r["collective"], r["size_bytes"]) for r in out] == [("alltoall", 64), ("alltoall", 4096), ("allreduce", 64), ("allreduce", 4096)]
    assert all(r["timing"] == "host" and r["time_min_us"] <= r["time_us"] <= r["time_max_us"] for r in out)
    assert (out[0]["time_min_us"], out[0]["time_us"], out[0]["time_max_us"]) == (10.0, 12.0, 14.0)
    assert busbw_by_size(out)[0] == ["size", "alltoall", "allreduce"]
    assert nccl_tests_rows(out, "alltoall")[0][3:7] == ("12.0", "10.0", "12.0", "14.0")


def test_tables_name_the_timing_of_every_number():
    out = aggregate_rows([_rank_row("allreduce", 64, 5.0, "graph"), _rank_row("ps_sharded", 64, 9.0, "blocking")], 1)
    assert collective_title(out, "allreduce") == "allreduce (out-of-place, timing: graph)"
    in_place = aggregate_rows([{**_rank_row("allreduce", 64, 5.0), "in_place": True}], 1)
    assert collective_title(in_place, "allreduce") == "allreduce (in-place, timing: host)"
    assert timing_label(out) == "timing: graph, blocking"
    assert timing_label([{"collective": "allreduce"}]) == "timing: unrecorded"


def test_direct_launch_path_stays_off_without_cuda_and_rows_say_torch():
    import torch
    import torch.distributed as dist

    from envmatrix.rank.nccl_direct import attach

    # no NCCL group on a CPU device: the engine keeps torch's calls (and records launch=torch per row)
    assert attach(dist, torch, torch.device("cpu"), "float32", 2) is None


def test_direct_buffers_are_the_first_bytes_of_one_arena_per_direction_like_nccl_tests():
    import torch

    from envmatrix.rank.collective_timer import BenchContext
    from envmatrix.rank.nccl_direct import Arena, arena

    c = BenchContext(None, torch, torch.device("cpu"), 0, 2, 2, "float32")
    assert c.send_buffer(values := torch.ones(4)) is values and c.recv_buffer(3).shape == (3,)  # no arena: torch's own
    c.arena = Arena(torch.zeros(64, dtype=torch.uint8), torch.zeros(64, dtype=torch.uint8))
    small, large = c.send_buffer(torch.full((2,), 7.0)), c.send_buffer(torch.arange(16, dtype=torch.float32))
    assert small.data_ptr() == large.data_ptr() == c.arena.send.data_ptr()  # every size starts at the block's start
    assert large.tolist() == list(range(16)) and large.dtype == torch.float32  # values copied in, not aliased
    recv = c.recv_buffer(5)
    assert recv.data_ptr() == c.arena.recv.data_ptr() and recv.shape == (5,) and recv.dtype == torch.float32
    # nccl-tests' startColl: shift = size * (iter % (maxbytes / size)); maxbytes is -e, not the last swept size
    assert c.shift(4) == (16, 4) and c.shift(16) == (64, 1) and c.shift(5) == (20, 3)
    c.arena = Arena(torch.zeros(256, dtype=torch.uint8), torch.zeros(256, dtype=torch.uint8), span=128)
    assert c.shift(4) == (16, 8)  # the span (-e) counts, not the block's padding
    assert BenchContext(None, torch, torch.device("cpu"), 0, 2, 2, "float32").shift(4) == (0, 1)  # no arena, no shift

    old_lib = type("NoMemAlloc", (), {"lib": object(), "torch": torch, "device": torch.device("cpu")})()
    assert arena(old_lib, 1 << 20) is None  # a libnccl before 2.19 has no ncclMemAlloc: torch's buffers, not an error


@pytest.mark.slow  # imports torch in the test process: 5.3 s under load
def test_graph_capture_binds_only_a_library_this_process_mapped():
    import torch  # noqa: F401  (maps torch's libraries, as in a rank)

    from envmatrix.rank.cuda_graph import runtime_graphs
    from envmatrix.rank.nccl_direct import mapped_library

    libc = mapped_library("/libc.so")
    assert libc is not None and libc.startswith("/")
    assert mapped_library("/libenvmatrix-not-a-library.so") is None
    # a CPU torch maps no libcudart: graph rows fall back to torch.cuda.graph (capture: torch), never another cudart
    expected_none = mapped_library("/libcudart.so") is None
    assert (runtime_graphs() is None) == expected_none


def test_bound_launch_binds_the_stream_last_and_names_the_nccl_error():
    import ctypes

    from envmatrix.rank.nccl_direct import BoundLaunch

    calls = []

    class Library:  # the libnccl boundary: records arguments, answers NCCL's codes
        def ncclGetErrorString(self, rc):
            return b"invalid argument"

    direct = type("Direct", (), {"lib": Library(), "_stream": lambda self: "current-stream"})()
    direct._fail = lambda rc, what: (_ for _ in ()).throw(RuntimeError(f"{what}: NCCL error {rc}: invalid argument"))
    ok = BoundLaunch(direct, lambda *args: calls.append(args) or 0, "ncclAllReduce", ("send", "recv", 8))
    ok()
    assert calls[-1] == ("send", "recv", 8, "current-stream")
    pinned = ok.on(ctypes.c_void_p(1234))
    assert pinned() == 0 and calls[-1][:3] == ("send", "recv", 8) and calls[-1][3].value == 1234
    bad = BoundLaunch(direct, lambda *args: 4, "ncclAllGather", ())
    assert bad.on("s")() == 4
    with pytest.raises(RuntimeError, match="ncclAllGather: NCCL error 4: invalid argument"):
        bad()


def test_meet_is_a_one_element_allreduce_on_the_timed_stream_then_its_sync():
    import ctypes
    import types

    import torch

    from envmatrix.rank.nccl_direct import DirectNccl

    calls, order, rc = [], [], [0]
    others = ("ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd")
    lib = types.SimpleNamespace(**{name: (lambda *args: 0) for name in others})  # the libnccl boundary
    lib.ncclAllReduce = lambda *args: calls.append(args) or order.append("launch") or rc[0]
    lib.ncclGetErrorString = lambda code: b"unhandled cuda error"
    direct = DirectNccl(lib, 0xC0FFEE, torch, torch.device("cpu"), "bfloat16", 2)
    direct.meet(ctypes.c_void_p(77), lambda: order.append("sync"))
    direct.meet(ctypes.c_void_p(78), lambda: order.append("sync"))
    assert order == ["launch", "sync", "launch", "sync"]  # each launch waited for before the clock starts
    (send, recv, count, dtype, op, comm, stream), second = calls
    assert send.value == recv.value == second[0].value  # one in-place flag, made once
    assert (count.value, dtype.value, op.value, comm.value) == (1, 9, 0, 0xC0FFEE)  # 1 bfloat16 element, sum
    assert stream.value == 77 and second[-1].value == 78  # on the stream the window will time
    rc[0] = 1
    with pytest.raises(RuntimeError, match="ncclAllReduce: NCCL error 1: unhandled cuda error"):
        direct.meet(ctypes.c_void_p(77), lambda: order.append("sync"))
    assert order[-1] == "launch"  # a failed launch is not waited for
