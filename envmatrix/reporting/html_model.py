"""What the HTML report shows (pure): sections built from a :class:`RunData` its caller loaded (app/report.py reads
a run directory's stores: sweep and bench results, bisect reports, a search study). Each section is built only from
what is there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from envmatrix.bench.aggregate import headline_bw, headline_rows
from envmatrix.reporting.hosts import algorithms_line, root_cause_host
from envmatrix.results import ProbeResult

# sweep_id prefixes written by the bisect and search commands; everything else is a sweep or bench cell.
BISECT_PREFIX = "bisect-"
SEARCH_PREFIX = "search-"


@dataclass
class Cell:
    grid: str
    setup: str
    outcome: str
    line: str  # root-cause line ("" when passed)
    rank: Optional[int]
    transport: str
    duration_s: float
    host: Optional[str] = None  # where the root-cause rank ran
    algorithms: str = ""  # NCCL TUNING: algorithm/protocol per collective
    thresholds: list = field(default_factory=list)  # judgement.thresholds.Check.to_json per expectation that applied


@dataclass
class MatrixModel:
    grids: list[str]
    setups: list[str]
    cells: dict[tuple[str, str], Cell]
    legend: list[tuple[str, str]]  # (setup, env text)


@dataclass
class Curve:
    label: str  # "(setup) grid"
    sizes: list[int]
    busbw: list[float]
    time_us: list[float]
    wrong: int


@dataclass
class SearchTrial:
    number: int
    state: str
    value: Optional[float]
    params: dict[str, Optional[str]]
    failure: str = ""


@dataclass
class SearchModel:
    name: str
    objective: str
    direction: str
    params: list[str]
    trials: list[SearchTrial]
    importances: list[tuple[str, float]]
    summary: list[str] = field(default_factory=list)


@dataclass
class RunData:
    run_dir: str
    results: list[ProbeResult] = field(default_factory=list)
    bisects: list[dict[str, Any]] = field(default_factory=list)
    search: Optional[SearchModel] = None

    @property
    def cell_results(self) -> list[ProbeResult]:
        return cell_results(self.results)


def cell_results(results: Sequence[ProbeResult]) -> list[ProbeResult]:
    """A run's own cells: bisect and search probes share its store but are not its cells."""
    return [r for r in results if not str(r.sweep_id or "").startswith((BISECT_PREFIX, SEARCH_PREFIX))]


def transport_of(result: ProbeResult) -> str:
    nccl = result.nccl or {}
    if nccl.get("transport"):
        return str(nccl["transport"])
    transports = nccl.get("transports") or {}
    return "+".join(sorted(transports)) if transports else ""


def build_matrix_model(results: Sequence[ProbeResult]) -> MatrixModel:
    from envmatrix.reporting.matrix import legend_for
    from envmatrix.reporting.matrix import setup_of

    from envmatrix.env.atoms import Setup

    def column(r: ProbeResult) -> str:
        return r.column

    grids = list(dict.fromkeys(r.grid for r in results))
    setups = {column(r): Setup(column(r), setup_of(r.setup).atoms) for r in results}
    cells = {}
    for r in results:  # later attempts/sweeps of the same cell win
        cells[(r.grid, column(r))] = Cell(
            r.grid, column(r), r.outcome, "" if r.passed else str((r.root_cause or {}).get("line") or ""),
            (r.root_cause or {}).get("rank"), transport_of(r), r.duration_s,
            None if r.passed else root_cause_host(r), algorithms_line(r.nccl or {}), list(r.thresholds),
        )
    network = {column(r): f"network {r.condition_name}: {r.condition_value}" for r in results if r.network}
    legend = [(name, f"{text}; {network[name]}" if name in network else text)
              for name, text in legend_for(list(setups.values()))]
    return MatrixModel(grids, list(setups), cells, legend)


def build_curves(results: Sequence[ProbeResult]) -> dict[str, list[Curve]]:
    """busbw and time vs size per collective, one curve per (setup, grid); out-of-place rows when both exist."""
    out: dict[str, list[Curve]] = {}
    for r in results:
        rows = headline_rows(r.metrics)
        for collective in dict.fromkeys(m["collective"] for m in rows):
            ms = sorted((m for m in rows if m["collective"] == collective and headline_bw(m) is not None), key=lambda m: m["size_bytes"])
            if not ms:
                continue
            out.setdefault(collective, []).append(Curve(
                f"({r.column}) {r.grid}" + (" (shared GPU: not representative)" if r.shared_gpu else ""),
                [int(m["size_bytes"]) for m in ms], [float(headline_bw(m)) for m in ms],
                [float(m.get("time_us") or 0.0) for m in ms], sum(int(m.get("wrong") or 0) for m in ms),
            ))
    return out


def measured_trials(trials: Sequence[SearchTrial]) -> list[SearchTrial]:
    """The trials the search plots draw: completed ones with a value (a trial search.screen stopped carries an
    estimate, not a measured value, and a study where every trial stopped has none to draw)."""
    return [t for t in trials if t.value is not None and t.state == "complete"]


def best_so_far(trials: Sequence[SearchTrial], direction: str) -> list[tuple[int, float]]:
    better = max if direction == "maximize" else min
    out, best = [], None
    for t in sorted(measured_trials(trials), key=lambda t: t.number):
        best = t.value if best is None else better(best, t.value)
        out.append((t.number, best))
    return out
