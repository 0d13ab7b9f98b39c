"""The collective timer: the rank side of a bench, timing and value-checking collectives over a size sweep.

Per collective: nccl-tests' warm-up over every size first; then per size ``iters`` launches timed as the chosen timing mode says
(envmatrix/bench/timing.py; default: nccl-tests' host-clock window), then a fresh run whose result is compared with the exact
expected values (nccl-tests' ``-c 1``: #wrong elements). Data are small integers whose sums over every
rank stay exact in the dtype (``bench.sizes.EXACT_INTEGERS``), so the check is exact in any reduction order.
"""

from __future__ import annotations

import ctypes
import functools
import statistics
import time
import warnings
from typing import Any, Callable, Optional

from envmatrix.bench.formulas import ALL, collective_spec
from envmatrix.bench.sizes import EXACT_INTEGERS, aligned_count, warmup_sweep
from envmatrix.bench.timing import check_timing
from envmatrix.rank.peer_patterns import (build_alltoall_all, build_alltoall_cross,  # noqa: F401
                                          build_alltoall_rail, build_pair_bidir, build_pair_latency, build_pair_uni,
                                          run_pairwise)


class BenchContext:
    def __init__(self, dist: Any, torch: Any, device: Any, rank: int, world: int, ppn: int, dtype: str) -> None:
        self.dist, self.torch, self.device = dist, torch, device
        self.rank, self.world, self.ppn = rank, world, ppn
        self.dtype = getattr(torch, dtype)
        self.type_size = torch.tensor([], dtype=self.dtype).element_size()
        self.exact_up_to = EXACT_INTEGERS[dtype]
        self.direct = None  # envmatrix.rank.nccl_direct.DirectNccl when launches bypass torch's call path
        self.enter: Optional[Callable[[str], Any]] = None  # progress marker before each (collective, size)
        self.arena = None  # envmatrix.rank.nccl_direct.Arena: ncclMemAlloc'd buffers for the direct launches
        self.launch_stream: Any = None  # see host_stream()
        # envmatrix.rank.launch_window.CompiledWindows: the host and graph windows from compiled code, when built
        self.windows: Any = None
        # who talks to whom (rank/peer_patterns.py): the driver's peer plans, split groups made, pair rounds
        self.peer_plans: dict[str, Any] = {}
        self.subgroups: dict[Any, Any] = {}
        self.pair_rounds: Optional[list] = None
        self.round_pairs: Optional[list] = None

    def host_stream(self) -> Any:
        """Where the ``host`` window's direct launches go: a torch.cuda.Stream of our own (non-blocking), as
        nccl-tests creates its streams; torch's current stream is the legacy default stream (handle 0), on which
        the same launches cost 0.3-1 us more per operation (issue 16, benchmarks/fidelity_h200.md)."""
        if self.launch_stream is None:
            self.launch_stream = self.torch.cuda.Stream(device=self.device)
        return self.launch_stream

    def pattern(self, count: int, seed: int) -> Any:
        """Small integers that differ by position and by ``seed`` (a rank or chunk id), no larger than a sum over
        every rank allows: with bfloat16 on 65+ ranks values up to 4 would sum past 256, where NCCL's reduction
        order rounds differently from the expected sum and good results would count as #wrong."""
        idx = self.torch.arange(count, device=self.device, dtype=self.torch.int64)
        largest = self.exact_up_to // self.world
        if largest >= 4:
            return ((idx % 3) + (seed % 3)).to(self.dtype)
        if largest >= 1:
            return ((idx + seed) % (largest + 1)).to(self.dtype)
        # more ranks than exact integers: a 1 from every period-th rank at each position
        period = -(-self.world // self.exact_up_to)
        return ((idx + seed) % period == 0).to(self.dtype)

    def send_buffer(self, values: Any) -> Any:
        """``values`` where the direct launches read them: the arena's first bytes (as nccl-tests), else values itself."""
        if self.arena is None:
            return values
        view = self.arena.view(self.arena.send, values.numel(), self.dtype)
        view.copy_(values)
        return view

    def recv_buffer(self, count: int) -> Any:
        if self.arena is None:
            return self.torch.empty(count, dtype=self.dtype, device=self.device)
        return self.arena.view(self.arena.recv, count, self.dtype)

    def shift(self, count: int) -> tuple[int, int]:
        """nccl-tests' per-iteration buffer shift for a size of ``count`` elements on the larger side: (stride in bytes,
        steps), steps = maxbytes // stride as in its startColl; (0, 1) without an arena."""
        if self.arena is None:
            return 0, 1
        stride = count * self.type_size
        return stride, max(1, self.arena.span // stride)

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)


# Each builder returns (run_once, check) for one size: run_once performs the operation,
# check() re-initialises inputs, runs once more and returns the number of wrong elements.
# run_once.in_place: True where the result overwrites the input (nccl-tests' in-place column).
Builder = Callable[[BenchContext, int], tuple[Callable[[], None], Callable[[], int]]]


def direct_or_torch(launch: Optional[Callable[[], None]], torch_call: Callable[[bool], Any]):
    """A builder's ``run``: the direct launch when one is attached (rank/nccl_direct.py), else torch's call."""

    def run(async_op=False):
        if launch is not None:
            launch()
            return []
        return [torch_call(async_op)]

    run.direct_launch = launch  # the timers bind it to their stream and shift it per iteration
    return run


def build_allreduce(c: BenchContext, count: int):
    buf = c.send_buffer(c.pattern(count, c.rank))
    # direct launches are out of place, like nccl-tests' out-of-place column; torch's all_reduce is in place
    out = c.recv_buffer(count) if c.direct is not None else buf
    launch = c.direct.all_reduce(buf, out, c.shift(count)) if c.direct is not None else None

    run = direct_or_torch(launch, lambda async_op: c.dist.all_reduce(buf, async_op=async_op))
    run.in_place = out is buf

    def check():
        buf.copy_(c.pattern(count, c.rank))
        out.zero_() if out is not buf else None
        run()
        expected = sum(c.pattern(count, r) for r in range(c.world))
        return int((out != expected).sum().item())

    return run, check


# `duplicates` pairs build_allgather with build_reduce_scatter: alike in shape on purpose, one builder per collective
# (the row's registration, ARCHITECTURE.md), each with its own buffers and expected values.
def build_allgather(c: BenchContext, count: int):
    chunk = count // c.world
    send, recv = c.send_buffer(c.pattern(chunk, c.rank)), c.recv_buffer(count)

    launch = c.direct.all_gather(send, recv, c.shift(count)) if c.direct is not None else None

    run = direct_or_torch(launch, lambda async_op: c.dist.all_gather_into_tensor(recv, send, async_op=async_op))

    def check():
        recv.zero_()
        run()
        expected = c.torch.cat([c.pattern(chunk, r) for r in range(c.world)])
        return int((recv != expected).sum().item())

    return run, check


# alike in shape to build_allgather on purpose: one builder per collective, its own buffers and expected values
def build_reduce_scatter(c: BenchContext, count: int):
    chunk = count // c.world
    send, recv = c.send_buffer(c.pattern(count, c.rank)), c.recv_buffer(chunk)

    launch = c.direct.reduce_scatter(send, recv, c.shift(count)) if c.direct is not None else None

    run = direct_or_torch(launch, lambda async_op: c.dist.reduce_scatter_tensor(recv, send, async_op=async_op))

    def check():
        recv.zero_()
        run()
        total = sum(c.pattern(count, r) for r in range(c.world))
        return int((recv != total[c.rank * chunk : (c.rank + 1) * chunk]).sum().item())

    return run, check


def build_alltoall(c: BenchContext, count: int):
    chunk = count // c.world

    def chunks_of(rank: int):
        return c.torch.cat([c.pattern(chunk, rank + peer) for peer in range(c.world)])

    send, recv = c.send_buffer(chunks_of(c.rank)), c.recv_buffer(count)

    launch = c.direct.all_to_all(send, recv, c.shift(count)) if c.direct is not None else None

    run = direct_or_torch(launch, lambda async_op: c.dist.all_to_all_single(recv, send, async_op=async_op))

    def check():
        recv.zero_()
        run()
        expected = c.torch.cat([c.pattern(chunk, src + c.rank) for src in range(c.world)])
        return int((recv != expected).sum().item())

    return run, check


def build_broadcast(c: BenchContext, count: int):
    buf = c.send_buffer(c.pattern(count, c.rank))
    out = c.recv_buffer(count) if c.direct is not None else buf  # out of place when launched directly
    launch = c.direct.broadcast(buf, out, 0, c.shift(count)) if c.direct is not None else None

    run = direct_or_torch(launch, lambda async_op: c.dist.broadcast(buf, 0, async_op=async_op))
    run.in_place = out is buf

    def check():
        buf.copy_(c.pattern(count, c.rank))
        out.zero_() if out is not buf else None
        run()
        return int((out != c.pattern(count, 0)).sum().item())

    return run, check


def build_reduce(c: BenchContext, count: int):
    buf = c.pattern(count, c.rank)

    def run(async_op=False):
        return [c.dist.reduce(buf, 0, async_op=async_op)]

    run.in_place = True

    def check():
        buf.copy_(c.pattern(count, c.rank))
        run()
        if c.rank != 0:
            return 0
        return int((buf != sum(c.pattern(count, r) for r in range(c.world))).sum().item())

    return run, check


def build_sendrecv(c: BenchContext, count: int):
    send, recv = c.pattern(count, c.rank), c.torch.empty(count, dtype=c.dtype, device=c.device)
    nxt, prv = (c.rank + 1) % c.world, (c.rank - 1) % c.world

    def run(async_op=False):
        ops = [c.dist.P2POp(c.dist.isend, send, nxt), c.dist.P2POp(c.dist.irecv, recv, prv)]
        reqs = c.dist.batch_isend_irecv(ops)
        if async_op:
            return reqs
        for req in reqs:
            req.wait()
        return []

    def check():
        recv.zero_()
        run()
        return int((recv != c.pattern(count, prv)).sum().item())

    return run, check


def p2p_pair(world: int, ppn: int) -> tuple[int, int]:
    """Seed 000's pair: rank 0 and the first rank of the next node (or rank 1 on one node)."""
    return 0, (ppn if world > ppn else 1)


def send_recv_run(c: BenchContext, buf, src: int, dst: int):
    """One blocking transfer of ``buf`` from ``src`` to ``dst``; every other rank takes no part."""

    def run(async_op=False):
        if c.rank == src:
            c.dist.send(buf, dst)
        elif c.rank == dst:
            c.dist.recv(buf, src)
        return []

    return run


def build_p2p(c: BenchContext, count: int):
    src, dst = p2p_pair(c.world, c.ppn)
    buf = c.pattern(count, src) if c.rank == src else c.torch.empty(count, dtype=c.dtype, device=c.device)
    run = send_recv_run(c, buf, src, dst)

    def check():
        if c.rank == dst:
            buf.zero_()
        run()
        return int((buf != c.pattern(count, src)).sum().item()) if c.rank == dst else 0

    return run, check


def build_ps_central(c: BenchContext, count: int):
    buf = c.pattern(count, c.rank)

    def run(async_op=False):
        c.dist.reduce(buf, 0)
        c.dist.broadcast(buf, 0)
        return []

    run.in_place = True

    def check():
        buf.copy_(c.pattern(count, c.rank))
        run()
        return int((buf != sum(c.pattern(count, r) for r in range(c.world))).sum().item())

    return run, check


def build_ps_sharded(c: BenchContext, count: int):
    chunk = count // c.world
    grads = c.pattern(count, c.rank)
    shards = c.torch.empty(count, dtype=c.dtype, device=c.device)
    full = c.torch.empty(count, dtype=c.dtype, device=c.device)

    def run(async_op=False):
        c.dist.all_to_all_single(shards, grads)
        mine = shards.view(c.world, chunk).sum(dim=0, dtype=c.dtype)
        c.dist.all_gather_into_tensor(full, mine)
        return []

    def check():
        grads.copy_(c.pattern(count, c.rank))
        full.zero_()
        run()
        total = sum(c.pattern(count, r) for r in range(c.world))
        # shard r holds positions r*chunk.. of every rank's buffer, summed
        expected = c.torch.cat([total[r * chunk : (r + 1) * chunk] for r in range(c.world)])
        return int((full != expected).sum().item())

    return run, check


# The collectives table names each row's builder; a row without one fails here, at import.
BUILDERS: dict[str, Builder] = {spec.name: globals()[spec.builder] for spec in ALL.values()}


# device-hides-launch only: a GPU-side sleep queued before the start event keeps
# the stream busy while the host is inside torch's launch path, so the events
# time the collectives alone. It hides the per-launch host cost that nccl-tests'
# window includes (issue 16: small sizes looked up to 2.8x faster), hence not default.
_HOLD_US_PER_LAUNCH = 100.0
_CYCLES_PER_US = 2000.0

# nccl-tests -G N launches the captured graph N times; we compare with -G 1.
GRAPH_LAUNCHES = 1


def _hold_stream(c: BenchContext, launches: int) -> None:
    c.torch.cuda._sleep(int((50.0 + _HOLD_US_PER_LAUNCH * launches) * _CYCLES_PER_US))


def _launch_all(run: Callable[..., list], iters: int) -> None:
    works: list = []
    for _ in range(iters):
        works += run(True)
    # on CUDA wait() only orders the current stream after the NCCL stream; the sync that follows blocks the host
    for work in works:
        work.wait()


def _start_together(c: BenchContext, stream: Any = None) -> None:
    """nccl-tests barriers before starting the clock, so rank skew stays out of the window; torch's all_reduce
    alone leaves the last rank behind by its post-launch bookkeeping, a direct allreduce on the timed stream
    (default: the current one) does not."""
    barrier(c)
    if c.direct is not None:
        stream = stream if stream is not None else c.torch.cuda.current_stream(c.device)
        c.direct.meet(ctypes.c_void_p(stream.cuda_stream), stream.synchronize)


def _sync_launch(c: BenchContext, run: Callable[..., list], direct: Any) -> None:
    """nccl-tests' "Sync" step: the window's first launch (iteration 0's buffers) once more, completed, just before
    its barrier. Why: that leaves those bytes in the GPU's L2 cache for the window's first launch, as in nccl-tests;
    without it the host window ran about 0.5 us per operation longer than nccl-tests' at 16 MiB on one H200
    (benchmarks/fidelity_h200.md), where the graph window, whose capture is preceded by such a launch, did not."""
    if direct is not None:
        direct.check(direct.on(ctypes.c_void_p(c.host_stream().cuda_stream), 0)())
        c.host_stream().synchronize()
    else:
        _launch_all(run, 1)
        c.sync()


def _timed_host(c: BenchContext, run: Callable[..., list], iters: int) -> float:
    """nccl-tests' default: host clock around ``iters`` back-to-back launches and the stream's drain (us per op).

    Direct launches run from compiled code when the extension was built (``c.windows``), else from a Python loop
    of bound calls; torch's calls (no direct path, or host-torch) from torch's own loop.
    """
    direct = getattr(run, "direct_launch", None) if c.direct is not None else None
    _sync_launch(c, run, direct)
    _start_together(c, c.host_stream() if direct is not None else None)
    if direct is not None and c.windows is not None:
        return c.windows.time_us(direct, c.host_stream().cuda_stream, iters)
    if direct is not None:
        calls = direct.window(ctypes.c_void_p(c.host_stream().cuda_stream), iters)  # warmups ran on the current stream, synced

        def launches() -> None:
            for call in calls:
                rc = call()
                if rc:
                    direct.check(rc)
    else:
        def launches() -> None:
            _launch_all(run, iters)
    t0 = time.perf_counter()
    launches()
    c.sync()
    return (time.perf_counter() - t0) * 1e6 / iters


def _timed_graph(c: BenchContext, run: Callable[..., list], iters: int, graphs: Any = None,
                 launches: int = GRAPH_LAUNCHES, census: Optional[list] = None) -> float:
    """nccl-tests -G: ``iters`` launches captured into one CUDA graph, the graph launched ``launches`` times, host-timed.

    ``graphs`` (rank/cuda_graph.py, direct launches only) captures and launches through the CUDA runtime as
    nccl-tests does; without it torch.cuda.graph captures, whose replay costs more GPU time per operation.
    ``census`` receives the cudart graph's nodes by type.
    """
    torch = c.torch
    compiled: Optional[Callable[[], float]] = None  # the window from compiled code (cudart graphs with c.windows)
    side = torch.cuda.Stream(device=c.device)
    side.wait_stream(torch.cuda.current_stream(c.device))
    with torch.cuda.stream(side):
        run()  # capture needs the collective already set up on a non-default stream
    torch.cuda.current_stream(c.device).wait_stream(side)
    c.sync()
    if graphs is not None:
        c.direct.pinned = ctypes.c_void_p(side.cuda_stream)
        try:
            direct = run.direct_launch  # graphs are only offered with direct launches
            captured = graphs.capture(c.direct.pinned, lambda: [direct(i) for i in range(iters)])
        finally:
            c.direct.pinned = None
        replay, finish, release = captured.launch, captured.synchronize, captured.close
        if census is not None:
            census.append(captured.census())
        if c.windows is not None:  # the launches and the drain from compiled code, as nccl-tests' own
            compiled = functools.partial(c.windows.graph_time_us, captured.graphs.lib.cudaGraphLaunch, captured.exe,
                                         c.direct.comm, captured.stream, launches, iters)
    else:
        graph = torch.cuda.CUDAGraph()
        # thread_local: c10d's watchdog thread may query events while this thread captures
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            if c.direct is not None:
                c.direct.pinned = c.direct.current_stream()  # the capture stream
            try:
                direct = getattr(run, "direct_launch", None)
                for i in range(iters):
                    direct(i) if direct is not None else run()
            finally:
                if c.direct is not None:
                    c.direct.pinned = None
        replay, finish, release = graph.replay, c.sync, (lambda: None)
    try:
        _start_together(c, side)
        if compiled is not None:
            return compiled()
        t0 = time.perf_counter()
        for _ in range(launches):
            replay()
        finish()
        return (time.perf_counter() - t0) * 1e6 / (iters * launches)
    finally:
        release()


def _timed_hidden(c: BenchContext, run: Callable[..., list], iters: int) -> float:
    """CUDA events around back-to-back launches behind a GPU sleep: device time, host launch cost hidden."""
    start, end = c.torch.cuda.Event(enable_timing=True), c.torch.cuda.Event(enable_timing=True)
    _hold_stream(c, iters)
    start.record()
    _launch_all(run, iters)
    end.record()
    c.sync()
    return start.elapsed_time(end) * 1e3 / iters


def timed_blocking(c: BenchContext, run: Callable[..., list], iters: int) -> list[float]:
    """Per-call host times in microseconds, each call completed (stream synced) before the next."""
    times = []
    for _ in range(iters):
        c.sync()
        t0 = time.perf_counter()
        run()
        c.sync()
        times.append((time.perf_counter() - t0) * 1e6)
    return times


WINDOW_TIMERS: dict[str, Callable[[BenchContext, Callable[..., list], int], float]] = {
    "host": _timed_host,
    "host-torch": _timed_host,
    "device-hides-launch": _timed_hidden,
}


# Timings whose launches go straight into libnccl on torch's communicator when that is available (nccl_direct.py);
# host-torch keeps torch.distributed's call path in the window on purpose.
DIRECT_TIMINGS = ("host", "graph")


def effective_timing(requested: str, collective: str) -> str:
    """The timing a row is actually measured with: dependent patterns always run call by call."""
    return "blocking" if ALL[collective].blocking_only or requested == "blocking" else requested


def barrier(c: BenchContext) -> None:
    flag = c.torch.ones(1, device=c.device)
    c.dist.all_reduce(flag)
    c.sync()


def _attach_direct(c: BenchContext, collectives: list[str], sizes: list[int], max_bytes: int) -> None:
    """Launch straight into torch's communicator (nccl_direct.py) over buffers as large as the sweep's bound."""
    from envmatrix.rank.launch_window import compiled_windows
    from envmatrix.rank.nccl_direct import arena, attach

    barrier(c)  # torch creates its communicator lazily: make sure it exists before taking its pointer
    c.direct = attach(c.dist, c.torch, c.device, str(c.dtype).replace("torch.", ""), c.world)
    if c.direct is None:
        return
    largest = max(aligned_count(s, c.type_size, c.world, collective_spec(n).split_by_ranks)
                  for n in collectives for s in sizes) * c.type_size
    c.arena = arena(c.direct, max(largest, max_bytes))
    c.windows = compiled_windows(c.direct.lib)


def _warm_up(c: BenchContext, name: str, sizes: list[int], warmup: int, max_bytes: int = 0) -> None:
    """nccl-tests' warm-up (its TimeTest): before the first window of a collective, ``warmup`` launches at every
    size of ``warmup_sweep``, each shifted by its iteration, each size drained. Why not right before each size's
    window: those launches left the window's iterations 1 to ``warmup - 1`` in the GPU's L2 cache, and 2 MiB
    ran up to 15 % faster than nccl-tests' on one H100 and one H200 (benchmarks/fidelity_h200.md)."""
    if warmup <= 0:
        return
    spec = collective_spec(name)
    for size in warmup_sweep(sizes, max_bytes):
        if c.enter is not None:
            c.enter(f"{name}@{size} warm-up")
        run, _ = BUILDERS[name](c, aligned_count(size, c.type_size, c.world, spec.split_by_ranks))
        warm = getattr(run, "direct_launch", None) if c.direct is not None else None
        for i in range(warmup):
            warm(i) if warm is not None else run()  # nccl-tests shifts its warmups' buffers too
        c.sync()
        del run


def run_bench(
    c: BenchContext,
    collectives: list[str],
    sizes: list[int],
    iters: int,
    warmup: int,
    check: bool = True,
    timing: str = "host",
    max_bytes: int = 0,
) -> list[dict[str, Any]]:
    """``max_bytes``: the sweep's upper bound (-e); the direct launches' buffers are that large, as nccl-tests'
    are, even where the last swept size is smaller (-e 64M -f 8 ends at 16M), so the per-iteration shift steps
    through the same bytes as nccl-tests does."""
    # a CUDA-only timing on a CPU group would die inside torch.cuda; say why instead
    check_timing(timing, "nccl" if c.device.type == "cuda" else "gloo", "bench.timing")
    rows = []
    tried_direct = False
    warnings.filterwarnings("ignore", category=FutureWarning)
    for name in collectives:
        if collective_spec(name).needs_peer and c.world < 2:
            continue  # point-to-point needs a peer
        spec = collective_spec(name)
        if spec.pairwise:
            rows += run_pairwise(c, name, sizes, iters, warmup, check)
            continue
        used = effective_timing(timing, name)
        if used in DIRECT_TIMINGS and c.direct is None and not tried_direct:
            tried_direct = True
            _attach_direct(c, collectives, sizes, max_bytes)
        _warm_up(c, name, sizes, warmup, max_bytes)
        # sizes that round to one count (-b 1 -i 30 on 5 ranks: 1 B and 31 B are both 20 B of reduce_scatter) are
        # measured once: the driver keys rows by (collective, size), and two windows there made one row of both
        first_size: dict[int, int] = {}
        for size in sizes:
            first_size.setdefault(aligned_count(size, c.type_size, c.world, spec.split_by_ranks), size)
        for count, size in first_size.items():
            if c.enter is not None:
                c.enter(f"{name}@{size}")
            run, verify = BUILDERS[name](c, count)
            barrier(c)
            # builders without a direct path (reduce, p2p patterns) ignore c.direct
            launch = "direct" if (c.direct is not None and used in DIRECT_TIMINGS and spec.direct) else "torch"
            capture, nodes = None, []
            if used == "blocking":
                times = timed_blocking(c, run, iters)
                mean = sum(times) / len(times)
            else:
                # one timed window, as nccl-tests: its mean is this rank's only sample
                if used == "graph":
                    from envmatrix.rank.cuda_graph import runtime_graphs

                    graphs = runtime_graphs() if launch == "direct" else None
                    capture = "cudart" if graphs is not None else "torch"
                    mean = _timed_graph(c, run, iters, graphs, census=nodes)
                else:
                    mean = WINDOW_TIMERS[used](c, run, iters)
                times = [mean]
            # windows of direct launches (host, cudart graph) run from compiled code (as nccl-tests) or from Python
            direct_window = used in DIRECT_TIMINGS and launch == "direct"
            loop = ("compiled" if c.windows is not None and capture != "torch" else "python") if direct_window else None
            wrong = verify() if check else None
            # p2p: the receiver's time, as seed 000 reports (and the pair tests do): a blocking send returns once
            # its bytes are handed to the transport, so averaging it in put small sizes under the link's floor
            reporter = name != "p2p" or c.rank == p2p_pair(c.world, c.ppn)[1]
            if not reporter:
                continue
            rows.append(
                {
                    "collective": name,
                    "size_bytes": count * c.type_size,
                    "count": count,
                    "dtype": str(c.dtype).replace("torch.", ""),
                    "iters": iters,
                    "warmup": warmup,
                    "time_us": mean,
                    "timing": used,
                    "launch": launch,
                    # nccl-tests allocates with ncclMemAlloc: NCCL registers those buffers in graph capture
                    "buffers": "ncclMemAlloc" if launch == "direct" and c.arena is not None else "torch",
                    "capture": capture,  # graph timing: cudart (as nccl-tests -G) or torch.cuda.graph
                    "graph_nodes": nodes[0] if nodes else None,  # the cudart graph's nodes by type
                    "loop": loop,
                    # nccl-tests' placement: torch's own allreduce, broadcast and reduce only run in place
                    "in_place": bool(getattr(run, "in_place", False)),
                    "time_min_us": min(times),
                    "time_median_us": statistics.median(times),
                    "time_max_us": max(times),
                    "wrong": wrong,
                    "rank": c.rank,
                    **getattr(run, "row_extra", {}),  # peer patterns: bytes per rank, peers, who was heard
                }
            )
            del run, verify
    return rows
