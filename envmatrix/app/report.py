"""Reading a run directory for a report: its stores become plain data (results, bisect reports, a search study's
model), which reporting renders. ``envmatrix report`` and every command's closing report.html come through here;
so do ``--baseline`` floors (a recorded run's results, judged by judgement.thresholds).

A run directory may hold any mix of: sweep and bench results (results.sqlite, or the results.json a sweep writes
next to it), bisect probes plus their ``bisect_*.json`` reports, and an Optuna study (study.sqlite).
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any, Optional

from envmatrix import paths as em_paths, values
from envmatrix.bench.expect import Expectation
from envmatrix.errors import ConfigError
from envmatrix.reporting.html_model import RunData, SearchModel, SearchTrial, cell_results
from envmatrix.results import ProbeResult


def whole_store(runs: list, results: list[ProbeResult], stored: list[ProbeResult]) -> tuple[list, list[ProbeResult]]:
    """The runs and results every report of a run directory shows: this command's ``runs`` and ``results``, then
    each cell of the store (``stored``: newest attempt of every run) that they do not cover, newest winning, so
    matrix.md and results.json show what report.html shows. Bisect and search probes are not cells."""
    from envmatrix.env.atoms import Atom, Setup
    from envmatrix.network.conditions import Condition
    from envmatrix.planning.grid import parse_grid
    from envmatrix.planning.plan import ProbeSpec, Run
    from envmatrix.reporting.matrix import column_name

    def cell(grid: str, setup: str, network: Optional[str]) -> tuple[str, str]:
        return grid, column_name(setup, network)

    covered = {cell(r.grid.label, r.setup.name, r.network and r.network.name) for r in runs}
    mine = {r.key for r in runs}
    extra: dict[tuple[str, str], tuple[Any, ProbeResult]] = {}
    for r in cell_results(stored):
        if r.run_key in mine or cell(r.grid, r.setup_name, r.network.get("name")) in covered:
            continue
        condition = Condition.from_json(r.network["condition"]) if r.network.get("condition") else None
        run = Run(r.run_key, Setup(r.setup_name, tuple(Atom.from_json(a) for a in (r.setup or {}).get("atoms", []))),
                  parse_grid(r.grid), ProbeSpec.make(r.probe.get("name", "builtin"), r.probe.get("params") or {}),
                  r.backend, r.launcher, condition)
        extra[cell(r.grid, r.setup_name, r.network.get("name"))] = (run, r)  # stored oldest first: newest wins
    return runs + [run for run, _ in extra.values()], results + [r for _, r in extra.values()]


def stored_cells(store: Any) -> list[ProbeResult]:
    """The store's newest attempt of every run, each run a sweep found in the store as a bisect's or search's
    probe (the same measurement, stored under that command's sweep_id and setup name: not a cell) adopted as that
    sweep's cell under the sweep's own setup name, as the sweep reported it."""
    owner: dict[str, tuple[str, Optional[dict]]] = {}
    for sweep in store.sweeps():  # oldest first: the sweep that last listed a run names it
        setups = sweep["config"].get("setups") or {}
        for key in sweep["config"].get("runs") or ():
            owner[key] = (sweep["id"], setups.get(key))
    results = store.latest()
    for result in results:
        if result.run_key in owner and not cell_results([result]):
            result.sweep_id, setup = owner[result.run_key]
            result.setup = setup or result.setup
    return results


def load_results(run_dir: str, where: str = "report") -> list[ProbeResult]:
    """Newest attempt of every stored run: results.sqlite, else the results.json a sweep writes next to it."""
    from envmatrix.engine.session import open_store_at

    run_dir = os.path.abspath(run_dir)  # the store URL is sqlite:///<path>: a relative path would turn absolute
    if os.path.isfile(run_dir) and run_dir.endswith((".sqlite", ".db")):
        store_path, json_path = run_dir, ""
    else:
        if not os.path.isdir(run_dir):
            raise ConfigError(f"{where}: {run_dir}: not a directory; give a run directory (the --out of a sweep, bench, bisect or search)")
        store_path, json_path = os.path.join(run_dir, "results.sqlite"), os.path.join(run_dir, "results.json")
    # An empty file is no store: opening it made SQLite write envmatrix's tables into it (a reader writing)
    if os.path.isfile(store_path) and os.path.getsize(store_path) > 0:
        with open_store_at(store_path) as store:
            return stored_cells(store)
    if json_path and os.path.isfile(json_path):
        with open(json_path) as fh:
            try:
                data = json.load(fh)
                return [ProbeResult.from_json(r) for r in data["results"]]
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{where}: {json_path}: not an envmatrix results.json ({exc})") from None
    return []


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
    """The first envmatrix study in study.sqlite, ranked by search's own helpers; optuna is imported only when
    the file exists."""
    if not os.path.isfile(study_path):
        return None
    import optuna

    from envmatrix.search.export import study_meta
    from envmatrix.search.study import make_storage
    from envmatrix.search.summary import importances

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(f"sqlite:///{study_path}", create=False)  # a corrupt file is one line, as export says it
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


def load_run(run_dir: str, results: Optional[list[ProbeResult]] = None) -> RunData:
    """Everything report.html shows of ``run_dir``; ConfigError (exit 2) when it holds nothing to show.
    ``results``: its store's newest attempts, when the command already read them (the store is not opened again)."""
    data = RunData(run_dir, load_results(run_dir) if results is None else list(results))
    data.bisects = load_bisects(run_dir)
    data.search = load_search(os.path.abspath(os.path.join(run_dir, "study.sqlite")))
    if not (data.results or data.bisects or data.search):
        raise ConfigError(f"report: {run_dir}: no results.sqlite, results.json, bisect_*.json or study.sqlite with results; "
                          "give the --out directory of a sweep, bench, bisect or search")
    return data


def load_baseline(run_dir: str, tolerance: Any) -> tuple[Expectation, ...]:
    """``--baseline RUN_DIR --tolerance T``: floors from that run's store (read, never written)."""
    from envmatrix.judgement.thresholds import baseline_expectations, parse_percent

    tolerance_pct = parse_percent(tolerance, "--tolerance")
    # a run whose ranks shared GPUs (emulated hosts) has figures, but none that a real run should be held to
    results = [r for r in cell_results(load_results(run_dir, "--baseline")) if not r.shared_gpu]
    found = baseline_expectations(results, tolerance_pct, f"baseline {os.path.basename(os.path.abspath(run_dir))}")
    if not found:
        raise ConfigError(f"--baseline {run_dir}: no passing run with bandwidth figures in its store (runs whose ranks "
                          f"shared GPUs do not count); allowed: a run directory of a bench or a sweep with probe.bench")
    return found


def write_html_report(run_dir: str, path: Optional[str] = None, title: Optional[str] = None,
                      results: Optional[list[ProbeResult]] = None) -> str:
    """Render the run directory and replace ``path`` (default RUN_DIR/report.html) atomically; ``results`` as in
    :func:`load_run`."""
    from envmatrix.reporting.html import REPORT_NAME, render_html

    if path is not None:  # report -o: checked before the run is read, so a bad path leaves nothing behind
        values.output_file("-o/--output", path, "html")
    html = render_html(load_run(run_dir, results), title)
    path = path or os.path.join(run_dir, REPORT_NAME)
    em_paths.make_parent(path)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write(html)
    os.replace(tmp, path)
    return path
