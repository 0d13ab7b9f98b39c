"""The physics check of a shaped run: a condition's rate puts a floor under every transfer's time.

With each host's egress shaped to R bit/s, a pattern whose busiest host must send B bytes cannot finish in less
than B*8/R seconds (seed 000: 64 MiB at 1 Gbit is at least 537 ms; it measured 541). B is S times the pattern's
bus factor, the same factor nccl-tests' busbw uses (bus bandwidth can never exceed the link), read from the one
collectives table; the two DP sync patterns of seed 001 have no bus factor there, so their floors are derived here:

- ps_central (reduce, then broadcast): every non-root host sends all S bytes of its contribution in the reduce,
  and the root sends all S bytes of the result in the broadcast; the calls are sequential, so 2 S.
- ps_sharded (all_to_all, then all_gather): every host receives (n-1)/n S in each call, n egress links carry
  it, so the busiest host sends at least (n-1)/n S per call: 2 (n-1)/n S.

n counts the hosts whose traffic crosses the shaped links (the grid's nodes); a one-node grid counts its ranks, as
if they were hosts: such a run is exactly the one whose traffic does not cross the link, and the check says so.

Three verdicts are never silent:
- ``shaping not in effect``: measured more than 15% under the floor, and the shaped qdiscs did not pass the payload
  (or nobody counted): the traffic went another way (loopback, shared memory, another interface), so the figure is
  not the condition's.
- ``under the floor``: more than 15% under it although the shaped qdiscs passed at least the payload: the traffic
  crossed the link, but the transfer was small enough for the sender's socket buffers (a few MB) and the shaper's
  burst to hide part of it (a p2p time is the mean of sender and receiver). Measured: 4 MiB at 200 Mbit 16% under.
- ``box-limited``: the shaped time is within noise of the unshaped run's while the floor says the condition should
  have cost more than that noise, or the unshaped run is itself slower than the floor (a rate above what the box
  reaches unshaped); the emulation box (CPU, memory bandwidth), not the condition, set the time.
Pure: stored rows in, verdicts out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from envmatrix.bench.formulas import ALL

UNDER_BOUND_TOLERANCE = 0.15  # measured below (1 - this) * S/R: shaping not in effect
NOISE_FRACTION = 0.10  # two runs within this fraction (or their own min-max spread) of each other are "the same"

OK = "ok"
NO_BOUND = "no bound"  # no rate in the condition (unshaped, delay or loss only): nothing to check against
NOT_IN_EFFECT = "shaping not in effect"
UNDER_FLOOR = "under the floor"
BOX_LIMITED = "box-limited"
BOX_LIMITED_LINE = "box-limited: the emulation, not the condition, sets this time"

# bytes the busiest host must send, per S, for the patterns the collectives table gives no bus factor
_PATTERN_FLOORS = {
    "ps_central": lambda n: 2.0,
    "ps_sharded": lambda n: 2.0 * (n - 1) / n,
}


@dataclass(frozen=True)
class PhysicsCheck:
    measured_s: float
    bound_s: Optional[float]  # the condition's floor (S/R times the pattern's factor); None without a rate
    baseline_s: Optional[float]  # the unshaped run's time of the same cell, where there is one
    verdict: str  # OK | NO_BOUND | NOT_IN_EFFECT | BOX_LIMITED
    line: str

    @property
    def flagged(self) -> bool:
        return self.verdict in (NOT_IN_EFFECT, UNDER_FLOOR, BOX_LIMITED)

    def to_json(self) -> dict[str, Any]:
        return {"measured_s": self.measured_s, "bound_s": self.bound_s, "baseline_s": self.baseline_s,
                "verdict": self.verdict, "line": self.line}


def hosts_crossing(grid_label: str) -> int:
    """'4x1' -> 4 hosts; '1x2' -> 2 (one node: its ranks stand for hosts, see the module's docstring)."""
    nodes, _, per_node = grid_label.partition("x")
    n, p = int(nodes), int(per_node or 1)
    return n if n > 1 else p


def bytes_factor(pattern: str, hosts: int) -> Optional[float]:
    """How many times S the busiest host must send for ``pattern`` among ``hosts``; None if unknown."""
    if hosts < 2:
        return None
    if pattern in _PATTERN_FLOORS:
        return _PATTERN_FLOORS[pattern](hosts)
    spec = ALL.get(pattern)
    return None if spec is None or spec.factor is None else spec.factor(hosts)


def floor_s(pattern: str, size_bytes: int, hosts: int, rate_bps: Optional[int]) -> Optional[float]:
    """The least time ``pattern`` of ``size_bytes`` can take with every host's egress at ``rate_bps``."""
    factor = bytes_factor(pattern, hosts)
    if not rate_bps or factor is None:
        return None
    return size_bytes * factor * 8 / rate_bps


def check(measured_s: float, bound_s: Optional[float], baseline_s: Optional[float] = None,
          baseline_spread_s: float = 0.0, crossed: Optional[bool] = None,
          baseline_min_s: Optional[float] = None) -> PhysicsCheck:
    """Judge one cell: its median time against the floor, and against the unshaped run of the same cell.
    ``crossed``: the shaped qdiscs passed at least the payload (None: not counted); ``baseline_min_s``: the unshaped
    run's fastest iteration (None: its median less the noise stands in)."""
    if bound_s is None:
        return PhysicsCheck(measured_s, None, baseline_s, NO_BOUND, "no rate shaped: no floor to check")
    ratio = measured_s / bound_s
    if measured_s < (1 - UNDER_BOUND_TOLERANCE) * bound_s and crossed:
        return PhysicsCheck(measured_s, bound_s, baseline_s, UNDER_FLOOR,
                            f"under the floor: {_ms(measured_s)} is {1 - ratio:.0%} under S/R {_ms(bound_s)} though "
                            "the payload crossed the shaped link: socket buffers and the shaper's burst hide part "
                            "of a transfer this small; larger sizes measure the condition")
    if measured_s < (1 - UNDER_BOUND_TOLERANCE) * bound_s:
        return PhysicsCheck(measured_s, bound_s, baseline_s, NOT_IN_EFFECT,
                            f"shaping not in effect: {_ms(measured_s)} is {1 - ratio:.0%} under the floor "
                            f"S/R {_ms(bound_s)}; the traffic did not cross the shaped link")
    if baseline_s is not None:
        noise = max(NOISE_FRACTION * baseline_s, baseline_spread_s)
        if abs(measured_s - baseline_s) <= noise and bound_s > noise:
            return PhysicsCheck(measured_s, bound_s, baseline_s, BOX_LIMITED,
                                f"{BOX_LIMITED_LINE} ({_ms(measured_s)} shaped vs {_ms(baseline_s)} unshaped, "
                                f"floor S/R {_ms(bound_s)})")
        fastest = baseline_min_s if baseline_min_s is not None else baseline_s - noise
        if bound_s < fastest:
            # 40 Gbit on a box whose fastest unshaped 64 MiB took 19.2 ms (28 Gbit): 41.4 ms read "ok" at 40 Gbit
            return PhysicsCheck(measured_s, bound_s, baseline_s, BOX_LIMITED,
                                f"{BOX_LIMITED_LINE}: the unshaped run ({_ms(fastest)} at its fastest) is already "
                                f"slower than the floor S/R {_ms(bound_s)}, so the box cannot reach this rate "
                                f"({_ms(measured_s)} shaped is not the condition's figure)")
    return PhysicsCheck(measured_s, bound_s, baseline_s, OK,
                        f"{_ms(measured_s)} = {ratio:.2f} x the floor S/R {_ms(bound_s)}")


def check_cell(pattern: str, size_bytes: int, grid_label: str, rate_bps: Optional[int], metric: Mapping[str, Any],
               baseline: Optional[Mapping[str, Any]] = None, sent_bytes: Optional[int] = None) -> PhysicsCheck:
    """One stored bench row (``time_median_us`` etc.) under a condition of ``rate_bps``; ``baseline`` is the
    unshaped run's row of the same pattern, size, grid and backend; ``sent_bytes`` what the run's shaped qdiscs
    passed in all (None: not counted)."""
    bound = floor_s(pattern, size_bytes, hosts_crossing(grid_label), rate_bps)
    base_s = spread = base_min = None
    if baseline is not None:
        base_s = sync_time_s(baseline)
        spread = (float(baseline.get("time_max_us") or 0) - float(baseline.get("time_min_us") or 0)) * 1e-6 / 2
        base_min = float(baseline["time_min_us"]) * 1e-6 if baseline.get("time_min_us") else None
    crossed = None if sent_bytes is None else sent_bytes >= size_bytes
    return check(sync_time_s(metric), bound, base_s, spread or 0.0, crossed, base_min)


def sync_time_s(metric: Mapping[str, Any]) -> float:
    """Time per synchronisation as the seeds report it: the median of the iterations (mean where no median)."""
    value = metric.get("time_median_us")
    return float(value if value is not None else metric["time_us"]) * 1e-6


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 10 else f"{seconds:.2f} s"
