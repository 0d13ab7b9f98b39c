"""Expected-bandwidth thresholds (pure): a measured cell below its expectation is ``slow``.

Expectations (envmatrix.bench.expect) come from a config's ``expect:`` block (busbw floors in GB/s or
time ceilings in us, per collective and message size, optionally per grid; envmatrix.config.expect parses
it) or from a recorded run (``--baseline RUN_DIR --tolerance 10%``: each stored point of the same setup, grid and backend,
less the tolerance; the application layer reads that run, ``app.report.load_baseline``). :func:`judge` is the one
place that turns a verdict into the ``slow`` outcome; :func:`evaluate_thresholds` is the verdict alone (host bisect
calls it). Pure: results in, verdicts out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Optional, Sequence

from envmatrix.bench.expect import BUSBW, METRICS, TIME, Expectation
from envmatrix.errors import ConfigError
from envmatrix.results import PASS, SLOW, ProbeResult


@dataclass
class Check:
    collective: str
    size_bytes: int
    metric: str
    expected: float
    measured: Optional[float]  # None: the run has no such point
    source: str

    @property
    def met(self) -> Optional[bool]:
        if self.measured is None:
            return None
        return self.measured >= self.expected if self.metric == BUSBW else self.measured <= self.expected

    def line(self) -> str:
        from envmatrix.bench.sizes import format_size

        unit, name = METRICS[self.metric], "busbw" if self.metric == BUSBW else "time"
        what = f"{self.collective} {format_size(self.size_bytes)} {name}"
        if self.measured is None:
            return f"{what} not measured (expected {_num(self.expected)} {unit}, {self.source})"
        relation = {True: ">=" if self.metric == BUSBW else "<=", False: "<" if self.metric == BUSBW else ">"}[bool(self.met)]
        return f"{what} {_num(self.measured)} {unit} {relation} expected {_num(self.expected)} {unit} ({self.source})"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "met": self.met, "line": self.line()}


@dataclass
class ThresholdVerdict:
    checks: list[Check] = field(default_factory=list)

    @property
    def shortfalls(self) -> list[Check]:
        return [c for c in self.checks if c.met is False]

    @property
    def slow(self) -> bool:
        return bool(self.shortfalls)

    def line(self) -> str:
        """The root-cause line of a slow cell: the worst shortfall first, then how many more."""
        worst = sorted(self.shortfalls, key=_ratio)
        more = f" (+{len(worst) - 1} more below expectation)" if len(worst) > 1 else ""
        return worst[0].line() + more if worst else ""


def _num(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def _ratio(check: Check) -> float:
    """measured/expected as a fraction of what was wanted (lower = worse), for ordering shortfalls."""
    if not check.measured or not check.expected:
        return 0.0
    return check.measured / check.expected if check.metric == BUSBW else check.expected / check.measured


def measured_points(result: ProbeResult) -> dict[tuple[str, int, str], float]:
    """(collective, size, metric) -> value; out-of-place rows when a run has both (as nccl-tests' headline)."""
    from envmatrix.bench.aggregate import headline_bw, headline_rows

    rows = headline_rows(result.metrics)
    points: dict[tuple[str, int, str], float] = {}
    for m in rows:
        key = (str(m.get("collective")), int(m.get("size_bytes") or 0))
        if headline_bw(m) is not None:
            points[(*key, BUSBW)] = float(headline_bw(m))
        if m.get("time_us") is not None:
            points[(*key, TIME)] = float(m["time_us"])
    return points


def evaluate_thresholds(result: ProbeResult, expectations: Sequence[Expectation]) -> ThresholdVerdict:
    """Every expectation that applies to ``result``, with what it measured; a grid's own beats the general one."""
    chosen: dict[tuple[str, str, int, str], Expectation] = {}
    for exp in expectations:
        if not exp.applies_to(result):
            continue
        key = (exp.source, exp.collective, exp.size_bytes, exp.metric)
        if key not in chosen or (chosen[key].grid is None and exp.grid is not None):
            chosen[key] = exp
    points = measured_points(result)
    return ThresholdVerdict([
        Check(e.collective, e.size_bytes, e.metric, e.value, _measured(result, points, e), e.source)
        for e in chosen.values()
    ])


def _measured(result: ProbeResult, points: dict[tuple[str, int, str], float], exp: Expectation) -> Optional[float]:
    """The value measured for ``exp``: at its size, else at the size its size was measured at on this grid
    (reduce_scatter 10K on 3 ranks is a 10236 B row), which nothing else in the run measured."""
    from envmatrix.bench.sizes import measured_bytes

    if (exp.collective, exp.size_bytes, exp.metric) in points:
        return points[(exp.collective, exp.size_bytes, exp.metric)]
    ranks = len(result.ranks)  # a measured run has every rank's record
    dtypes = {m.get("dtype") for m in result.metrics if m.get("collective") == exp.collective}
    sizes = {measured_bytes(exp.collective, exp.size_bytes, d, ranks) for d in dtypes}
    return next((points[(exp.collective, s, exp.metric)] for s in sorted(sizes) if (exp.collective, s, exp.metric) in points), None)


def judge(result: ProbeResult, expectations: Sequence[Expectation]) -> ProbeResult:
    """Set ``slow`` (or back to ``pass``) from the current expectations; other failures stay as they are."""
    verdict = evaluate_thresholds(result, expectations)
    result.thresholds = [c.to_json() for c in verdict.checks]
    if result.outcome not in (PASS, SLOW):
        return result
    if verdict.slow:
        line = verdict.line()
        result.outcome, result.root_cause = SLOW, {"rank": None, "outcome": SLOW, "line": line, "error": line}
    elif result.outcome == SLOW:
        result.outcome, result.root_cause = PASS, {}
    return result


# ---- baselines ---------------------------------------------------------------------------------------------

def parse_percent(text: Any, flag: str) -> float:
    """``10%``, ``10`` (percent) or ``0.1`` (a fraction below 1) -> percent in [0, 100)."""
    raw = str(text).strip()
    try:
        value = float(raw.rstrip("%"))
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: not a number; allowed: a percentage such as 5% or 2.5") from None
    if not raw.endswith("%") and 0 < value < 1:
        value *= 100.0
    if not 0 <= value < 100:
        raise ConfigError(f"{flag} {text!r}: out of range; allowed: 0% <= {flag.lstrip('-')} < 100%")
    return value


def baseline_expectations(results: Iterable[ProbeResult], tolerance_pct: float, source: str) -> tuple[Expectation, ...]:
    """Each passing (or slow) stored point becomes a busbw floor for the same setup, grid and backend."""
    out = []
    for result in results:
        if result.outcome not in (PASS, SLOW):
            continue
        for (collective, size, metric), value in sorted(measured_points(result).items()):
            if metric != BUSBW or value <= 0:
                continue
            floor = value * (1 - tolerance_pct / 100.0)
            out.append(Expectation(collective, size, BUSBW, floor, grid=result.grid, setup=result.setup_name,
                                   backend=result.backend, source=f"{source}: {_num(value)} GB/s -{tolerance_pct:g}%"))
    return tuple(out)
