"""Run A vs run B (pure): cells that flipped, and busbw drops beyond a threshold per (setup, grid, collective, size).

:attr:`RunDiff.regressed` is the upgrade gate's verdict (``envmatrix diff`` exits 1 on it); reporting.diff renders it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Sequence

from envmatrix.bench.aggregate import headline_bw, headline_rows
from envmatrix.judgement.thresholds import parse_percent
from envmatrix.results import UNRESOLVED, ProbeResult

CellKey = tuple[str, str, str]  # (setup, grid, backend); the setup as its matrix column: "base @ b1g" on a network axis
PointKey = tuple[str, str, str, str, int]  # (setup, grid, backend, collective, size_bytes)


@dataclass
class Flip:
    setup: str
    grid: str
    backend: str
    before: str
    after: str
    line: str  # root-cause line of the failing side (run B's for pass->fail)


@dataclass
class BusbwChange:
    setup: str
    grid: str
    backend: str
    collective: str
    size_bytes: int
    before_gbps: float
    after_gbps: float

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.after_gbps - self.before_gbps) / self.before_gbps

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "change_pct": round(self.change_pct, 2)}


@dataclass
class RunDiff:
    threshold_pct: float
    broke: list[Flip] = field(default_factory=list)  # pass -> fail
    fixed: list[Flip] = field(default_factory=list)  # fail -> pass
    changed_failure: list[Flip] = field(default_factory=list)  # fail -> another failure class
    slower: list[BusbwChange] = field(default_factory=list)  # busbw dropped beyond the threshold
    compared_points: int = 0
    compared_cells: int = 0
    only_a: list[CellKey] = field(default_factory=list)
    only_b: list[CellKey] = field(default_factory=list)
    untested: list[CellKey] = field(default_factory=list)  # run A's verdict, run B unresolved (exit 125: cannot test)
    unmeasured: list[PointKey] = field(default_factory=list)  # run A's busbw points a passing run B has no figure for

    @property
    def regressed(self) -> bool:
        return bool(self.broke or self.slower)

    @property
    def inconclusive(self) -> bool:
        """No regression seen, but a cell of the reference was not compared (run B lacks it: a smaller grid, a sweep
        killed before it, another run altogether), or a busbw point of it was not (run B benched other sizes, or
        not at all): a gate cannot vouch for what it never compared."""
        return not self.regressed and (self.compared_cells == 0 or bool(self.only_a) or bool(self.untested)
                                       or bool(self.unmeasured))

    def to_json(self) -> dict[str, Any]:
        return {
            "threshold_pct": self.threshold_pct,
            "regressed": self.regressed,
            "inconclusive": self.inconclusive,
            "cells_compared": self.compared_cells,
            "pass_to_fail": [asdict(f) for f in self.broke],
            "fail_to_pass": [asdict(f) for f in self.fixed],
            "failure_changed": [asdict(f) for f in self.changed_failure],
            "busbw_regressions": [c.to_json() for c in self.slower],
            "busbw_points_compared": self.compared_points,
            "only_in_a": [list(k) for k in self.only_a],
            "only_in_b": [list(k) for k in self.only_b],
            "untested": [list(k) for k in self.untested],
            "busbw_points_missing_in_b": [list(k) for k in self.unmeasured],
        }


def parse_threshold(text: str) -> float:
    """``5%``, ``5`` (percent) or ``0.05`` (fraction below 1) -> percent."""
    return parse_percent(text, "--busbw-drop")


def _cells(results: Sequence[ProbeResult]) -> dict[CellKey, ProbeResult]:
    # later results (newer attempts) win; each network condition is a cell of its own, as in the matrix
    return {(r.column, r.grid, r.backend): r for r in results}


def _bw_points(result: ProbeResult) -> dict[tuple[str, int], float]:
    rows = headline_rows(result.metrics)
    return {(m["collective"], int(m["size_bytes"])): float(headline_bw(m)) for m in rows if headline_bw(m) is not None}


def _line(result: ProbeResult) -> str:
    return str((result.root_cause or {}).get("line") or "")


def diff_runs(a: Sequence[ProbeResult], b: Sequence[ProbeResult], threshold_pct: float) -> RunDiff:
    cells_a, cells_b = _cells(a), _cells(b)
    out = RunDiff(threshold_pct)
    out.only_a = [k for k in cells_a if k not in cells_b]
    out.only_b = [k for k in cells_b if k not in cells_a]
    for key, ra in cells_a.items():
        rb: Optional[ProbeResult] = cells_b.get(key)
        if rb is None:
            continue
        if rb.outcome == UNRESOLVED and ra.outcome != UNRESOLVED:  # run B could not test it: as a cell it lacks
            out.untested.append(key)
            continue
        out.compared_cells += 1
        if ra.passed and not rb.passed:
            out.broke.append(Flip(*key, ra.outcome, rb.outcome, _line(rb)))
        elif not ra.passed and rb.passed:
            out.fixed.append(Flip(*key, ra.outcome, rb.outcome, _line(ra)))
        elif not ra.passed and not rb.passed and ra.outcome != rb.outcome:
            out.changed_failure.append(Flip(*key, ra.outcome, rb.outcome, _line(rb)))
        pa, pb = _bw_points(ra), _bw_points(rb)
        if rb.passed:  # a failed run B is already pass->fail; a passing one without A's figures measured less
            out.unmeasured += [(*key, *point) for point in sorted(pa.keys() - pb.keys()) if pa[point] > 0]
        for point in sorted(pa.keys() & pb.keys()):
            if pa[point] <= 0:
                continue
            out.compared_points += 1
            change = BusbwChange(*key, point[0], point[1], pa[point], pb[point])
            if -change.change_pct > threshold_pct:
                out.slower.append(change)
    return out
