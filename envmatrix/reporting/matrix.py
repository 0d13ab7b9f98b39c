"""The seed-003 matrix: rows = grids, columns = setups, cells 1/0 (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from envmatrix.env.atoms import Atom, Setup, in_shell_order, setup_diff
from envmatrix.planning.plan import Run
from envmatrix.reporting.hosts import root_cause_host
from envmatrix.results import SLOW, UNRESOLVED, ProbeResult, column_name


@dataclass
class Failure:
    setup: str
    grid: str
    outcome: str
    rank: Optional[int]
    line: str
    host: Optional[str] = None  # where the root-cause rank ran


@dataclass
class Matrix:
    columns: list[str]
    rows: list[str]
    cells: dict[tuple[str, str], Optional[ProbeResult]]
    legend: list[tuple[str, str]]  # (column, env text)
    failures: list[Failure] = field(default_factory=list)

    def cell(self, grid: str, setup: str) -> str:
        result = self.cells.get((grid, setup))
        if result is None:
            return "-"
        if result.outcome == SLOW:
            return "s"  # ran correctly, below an expected bandwidth
        if result.outcome == UNRESOLVED:
            return "?"  # the probe could not test (exit 125): neither a pass nor a failure, as the summary counts it
        return "1" if result.passed else "0"


def setup_of(data: dict) -> Setup:
    return Setup(data["name"], tuple(Atom.from_json(a) for a in data.get("atoms", [])))


def legend_for(setups: Sequence[Setup], backend: Optional[str] = None) -> list[tuple[str, str]]:
    """First column in full; every other column as a diff against it.

    With ``backend``, a setup's variables that backend never reads are marked, so an all-pass
    column under gloo is not mistaken for a tested NCCL setting.
    """
    if not setups:
        return []
    first = setups[0]
    rows = [(first.name, "; ".join(map(str, in_shell_order(first.atoms))) or "(inherited env only)")]
    for setup in setups[1:]:
        rows.append((setup.name, "; ".join(setup_diff(first, setup)) or f"same as {first.name}"))
    if backend:
        from envmatrix.catalog.backends import ignored_by

        marks = {s.name: ignored_by(backend, s.atoms) for s in setups}
        rows = [(name, text + (f" [ignored by {backend}: {', '.join(marks[name])}]" if marks[name] else ""))
                for name, text in rows]
    return rows


def _network_legend(runs: Sequence[Run]) -> dict[str, str]:
    return {column_name(r.setup.name, r.network.name): f"network {r.network.name}: {r.network.describe()}"
            for r in runs if r.network is not None}


def build_matrix(runs: Sequence[Run], results: Sequence[ProbeResult], grid_order: Sequence[str] = ()) -> Matrix:
    """``grid_order``: the grids as the user gave them; runs go cheapest grid first, rows do not. With a network
    axis a column is (setup, condition), its legend naming the condition's value."""
    by_key = {r.run_key: r for r in results}
    setups = list({column_name(r.setup.name, r.network and r.network.name): Setup(
        column_name(r.setup.name, r.network and r.network.name), r.setup.atoms) for r in runs}.values())
    columns = [s.name for s in setups]
    ran = list(dict.fromkeys(r.grid.label for r in runs))
    rows = [g for g in dict.fromkeys(grid_order) if g in ran] + [g for g in ran if g not in grid_order]
    cells = {(r.grid.label, column_name(r.setup.name, r.network and r.network.name)): by_key.get(r.key) for r in runs}
    failures = [
        Failure(column, res.grid, res.outcome, res.root_cause.get("rank"), str(res.root_cause.get("line") or ""),
                root_cause_host(res))
        for (grid, column), res in cells.items()
        if res is not None and not res.passed
    ]
    from envmatrix.catalog.backends import backend_governs

    # a command probe (nccl-tests, a script) reads NCCL_* whatever the backend: nothing it is given is ignored
    backend = runs[0].backend if runs and backend_governs(runs[0].probe.name) else None
    network = _network_legend(runs)
    legend = [(name, f"{text}; {network[name]}" if name in network else text)
              for name, text in legend_for(setups, backend)]
    return Matrix(columns, rows, cells, legend, failures)
