"""The one collectives table: name, nccl-tests binary, busbw factor, in-rank builder.

The bench formulas, the nccl-tests parser (binary -> collective), the rank
bench engine (rank/collective_timer.py: builder functions, direct launches,
blocking-only patterns) and the tuner-file export (search/export.py) all read :data:`ALL`; adding a collective is one row
here plus its builder function in the engine.

Source: NVIDIA nccl-tests doc/PERFORMANCE.md and the ``*GetBw`` functions in
src/*.cu (v2.19.6). ``algbw = S / t`` in GB/s (1e9 bytes), ``busbw = algbw *
factor(n)`` with n ranks, where S is the "size" column nccl-tests prints:

- all_reduce: count*typesize, factor 2(n-1)/n
- all_gather, reduce_scatter: the total buffer (per-rank count * n), factor (n-1)/n
- alltoall: per-peer count * n * typesize, factor (n-1)/n
- broadcast, reduce, sendrecv: count*typesize, factor 1

The DP sync patterns of seed 001 (ps_central = reduce + broadcast, ps_sharded =
all_to_all + all_gather) and seed 000's two-rank point-to-point have no
nccl-tests counterpart; they report time and algbw (S/t) and, for p2p, the
sendrecv factor 1 and the receiver's time (seed 000 reports the receive side).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class CollectiveSpec:
    name: str
    factor: Optional[Callable[[int], float]]  # None: no bus bandwidth defined
    split_by_ranks: bool  # element count must divide by n (per-rank chunks)
    nccl_tests_binary: Optional[str]
    builder: str  # name of the builder function in envmatrix.rank.collective_timer
    # launched straight into libnccl by the direct path (rank/nccl_direct.py) when that is available
    direct: bool = False
    # a data dependency inside (a local sum, a reused send buffer): each call completes before the next
    blocking_only: bool = False
    # collective_type in the NCCL CSV tuner plugin's file (search export); None: the tuner cannot steer it (p2p-based)
    tuner_name: Optional[str] = None
    # measured pair by pair in the rounds the driver planned (planning/pairs.py), not once over all ranks
    pairwise: bool = False
    # point-to-point between distinct ranks: not measured on a one-rank grid (the driver warns)
    needs_peer: bool = False


def _ring(n: int) -> float:
    return 2 * (n - 1) / n


def _gather(n: int) -> float:
    return (n - 1) / n


def _one(n: int) -> float:
    return 1.0


COLLECTIVES: dict[str, CollectiveSpec] = {
    "allreduce": CollectiveSpec("allreduce", _ring, False, "all_reduce_perf", "build_allreduce", direct=True, tuner_name="allreduce"),
    "allgather": CollectiveSpec("allgather", _gather, True, "all_gather_perf", "build_allgather", direct=True, tuner_name="allgather"),
    "reduce_scatter": CollectiveSpec("reduce_scatter", _gather, True, "reduce_scatter_perf", "build_reduce_scatter", direct=True, tuner_name="reducescatter"),
    "alltoall": CollectiveSpec("alltoall", _gather, True, "alltoall_perf", "build_alltoall", direct=True),
    "broadcast": CollectiveSpec("broadcast", _one, False, "broadcast_perf", "build_broadcast", direct=True, tuner_name="broadcast"),
    "reduce": CollectiveSpec("reduce", _one, False, "reduce_perf", "build_reduce", tuner_name="reduce"),
    "sendrecv": CollectiveSpec("sendrecv", _one, False, "sendrecv_perf", "build_sendrecv", needs_peer=True),
}

PATTERNS: dict[str, CollectiveSpec] = {
    "p2p": CollectiveSpec("p2p", _one, False, None, "build_p2p", blocking_only=True, needs_peer=True),
    "ps_central": CollectiveSpec("ps_central", None, False, None, "build_ps_central", blocking_only=True),
    "ps_sharded": CollectiveSpec("ps_sharded", None, True, None, "build_ps_sharded", blocking_only=True),
    # Peer-group all-to-all (issue 34, seed 002): grouped send/recv of the message size to the planned peers
    # (planning/peers.py); the row's size is what one rank sends (messages x message size), so algbw is seed
    # 002's GB/s per rank, and every byte crosses to a peer (factor 1).
    "alltoall_all": CollectiveSpec("alltoall_all", _one, False, None, "build_alltoall_all", blocking_only=True, needs_peer=True),
    "alltoall_rail": CollectiveSpec("alltoall_rail", _one, False, None, "build_alltoall_rail", blocking_only=True, needs_peer=True),
    "alltoall_cross": CollectiveSpec("alltoall_cross", _one, False, None, "build_alltoall_cross", blocking_only=True, needs_peer=True),
    # Pair tests (issue 34, seeds 000 and 004), one row per (ordered) pair: one-way bandwidth, both ways at once
    # (size: both directions together), and latency (half a ping-pong round trip: no bandwidth).
    "pair_uni": CollectiveSpec("pair_uni", _one, False, None, "build_pair_uni", blocking_only=True, pairwise=True, needs_peer=True),
    "pair_bidir": CollectiveSpec("pair_bidir", _one, False, None, "build_pair_bidir", blocking_only=True, pairwise=True, needs_peer=True),
    "pair_latency": CollectiveSpec("pair_latency", None, False, None, "build_pair_latency", blocking_only=True,
                                   pairwise=True, needs_peer=True),
}

ALL = {**COLLECTIVES, **PATTERNS}


def collective_spec(name: str) -> CollectiveSpec:
    return ALL[name]


def collective_of_binary() -> dict[str, str]:
    """nccl-tests binary -> collective, for every row that nccl-tests can measure."""
    return {spec.nccl_tests_binary: spec.name for spec in ALL.values() if spec.nccl_tests_binary}


def bandwidths(name: str, size_bytes: int, time_us: float, ranks: int) -> tuple[float, Optional[float]]:
    """(algbw, busbw) in GB/s, exactly as nccl-tests computes them."""
    if time_us <= 0:
        return 0.0, None
    algbw = size_bytes / (time_us * 1e-6) / 1e9
    factor = ALL[name].factor
    return algbw, (algbw * factor(ranks) if factor is not None else None)
