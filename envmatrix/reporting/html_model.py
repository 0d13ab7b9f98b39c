"""What the HTML report shows, built from a run directory's stores (pure once loaded).

A run directory may hold any mix of: sweep and bench results (results.sqlite),
bisect probes plus their ``bisect_*.json`` reports, and an Optuna study
(study.sqlite). Each section is built only from what is there.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from envmatrix.bench.aggregate import headline_rows
from envmatrix.reporting.bench_tables import headline_bw
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
    thresholds: list = field(default_factory=list)  # thresholds.Check.to_json per expectation that applied


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
        return [r for r in self.results if not str(r.sweep_id or "").startswith((BISECT_PREFIX, SEARCH_PREFIX))]


def transport_of(result: ProbeResult) -> str:
    nccl = result.nccl or {}
    if nccl.get("transport"):
        return str(nccl["transport"])
    transports = nccl.get("transports") or {}
    return "+".join(sorted(transports)) if transports else ""


def build_matrix_model(results: Sequence[ProbeResult]) -> MatrixModel:
    from envmatrix.reporting.matrix import legend_for
    from envmatrix.reporting.matrix import _setup_of

    grids = list(dict.fromkeys(r.grid for r in results))
    setups = {r.setup_name: _setup_of(r.setup) for r in results}
    cells = {}
    for r in results:  # later attempts/sweeps of the same cell win
        cells[(r.grid, r.setup_name)] = Cell(
            r.grid, r.setup_name, r.outcome, "" if r.passed else str((r.root_cause or {}).get("line") or ""),
            (r.root_cause or {}).get("rank"), transport_of(r), r.duration_s,
            None if r.passed else root_cause_host(r), algorithms_line(r.nccl or {}), list(r.thresholds),
        )
    return MatrixModel(grids, list(setups), cells, legend_for(list(setups.values())))


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
                f"({r.setup_name}) {r.grid}", [int(m["size_bytes"]) for m in ms], [float(headline_bw(m)) for m in ms],
                [float(m.get("time_us") or 0.0) for m in ms], sum(int(m.get("wrong") or 0) for m in ms),
            ))
    return out


def load_bisects(run_dir: str) -> list[dict[str, Any]]:
    """bisect reports saved next to the store (``bisect_*.json`` per target, or a ``--json`` list)."""
    reports: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "bisect*.json"))):
        try:
            with open(path) as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue  # not ours (or half written): the page still renders the rest
        for rep in data if isinstance(data, list) else [data]:
            if isinstance(rep, dict) and "trail" in rep and "atoms" in rep:
                reports[(str(rep.get("name")), str(rep.get("grid")))] = rep  # a --json copy and the per-target file agree
    return list(reports.values())


def load_search(study_path: str) -> Optional[SearchModel]:
    """The first envmatrix study in study.sqlite; optuna is imported only when the file exists."""
    if not os.path.isfile(study_path):
        return None
    import optuna

    from envmatrix.search.export import study_meta
    from envmatrix.search.report import importances

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{study_path}"
    summaries = optuna.study.get_all_study_summaries(storage, include_best_trial=False)
    if not summaries:
        return None
    study = optuna.load_study(study_name=summaries[-1].study_name, storage=storage)
    space, objectives, meta = study_meta(study)
    names = list(space.vars)
    trials = []
    for t in study.get_trials(deepcopy=False):
        value = t.values[0] if t.values else None
        failure = ""
        if t.user_attrs.get("failed") or t.user_attrs.get("failure_class"):
            failure = f"{t.user_attrs.get('failure_class', 'failed')}: {t.user_attrs.get('root_cause') or ''}".strip()
        trials.append(SearchTrial(t.number, t.state.name.lower(), value,
                                  {n: (None if t.params.get(n) is None else str(t.params.get(n))) for n in names}, failure))
    table = importances(study, list(objectives), names)
    imp = []
    if table is not None and table[0] and table[0][0] == "parameter":
        imp = [(row[0], float(row[1])) for row in table[1]]
    o = objectives[0]
    summary = [f"grids {', '.join(meta.get('grids', []))}; backend {meta.get('backend')}; {len(trials)} trials"]
    return SearchModel(study.study_name, o.name, o.direction, names, trials, imp, summary)


def load_results(run_dir: str, where: str = "report") -> list[ProbeResult]:
    """Newest attempt of every stored run: results.sqlite, else the results.json a sweep writes next to it."""
    from envmatrix.engine.session import open_store_at
    from envmatrix.errors import ConfigError

    run_dir = os.path.abspath(run_dir)  # the store URL is sqlite:///<path>: a relative path would turn absolute
    if os.path.isfile(run_dir) and run_dir.endswith((".sqlite", ".db")):
        store_path, json_path = run_dir, ""
    else:
        if not os.path.isdir(run_dir):
            raise ConfigError(f"{where}: {run_dir}: not a directory; give a run directory (the --out of a sweep, bench, bisect or search)")
        store_path, json_path = os.path.join(run_dir, "results.sqlite"), os.path.join(run_dir, "results.json")
    if os.path.isfile(store_path):
        with open_store_at(store_path) as store:
            return store.latest()
    if json_path and os.path.isfile(json_path):
        with open(json_path) as fh:
            try:
                data = json.load(fh)
                return [ProbeResult.from_json(r) for r in data["results"]]
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{where}: {json_path}: not an envmatrix results.json ({exc})") from None
    return []


def load_run(run_dir: str) -> RunData:
    from envmatrix.errors import ConfigError

    data = RunData(run_dir, load_results(run_dir))
    data.bisects = load_bisects(run_dir)
    data.search = load_search(os.path.abspath(os.path.join(run_dir, "study.sqlite")))
    if not (data.results or data.bisects or data.search):
        raise ConfigError(f"report: {run_dir}: no results.sqlite, results.json, bisect_*.json or study.sqlite with results; "
                          "give the --out directory of a sweep, bench, bisect or search")
    return data


def best_so_far(trials: Sequence[SearchTrial], direction: str) -> list[tuple[int, float]]:
    better = max if direction == "maximize" else min
    out, best = [], None
    for t in sorted(trials, key=lambda t: t.number):
        if t.value is None or t.state != "complete":
            continue
        best = t.value if best is None else better(best, t.value)
        out.append((t.number, best))
    return out
