"""``envmatrix search``: the best-busbw env by Optuna ask/tell.

Optuna is imported only inside this command (and export), so ``envmatrix sweep``/``bench``
never pay for it; the driver imports torch only for ``search.sampler=gp``
(Optuna's GPSampler needs it).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Sequence

from envmatrix import paths as em_paths
from envmatrix.errors import require

SEARCH_EXAMPLES = """examples:
  envmatrix search conf=search_demo                        # TPE, SQLite study in reports/runs/<name>/
  envmatrix search conf=search_h200 search.trials=40 search.sampler=random search.seed=3
  envmatrix search conf=search_h200 --trials 40 search.storage=postgresql://user@db/envmatrix search.study_name=h200
  envmatrix export --out reports/runs/search_demo          # best.sh, best_setup.yaml, tuner.csv
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "search",
        help="find the best-busbw env with Optuna (ask/tell); a fleet of workers can share one study",
        description="Sample setups from the config's search.space (catalog-checked; search.fixed pinned, search.forbid never "
        "launched), probe + bench each on the config's grids, tell Optuna the objective (search.objective). Every result "
        "also goes to the run directory's store. Config content is given as Hydra overrides (search.trials=40).",
        epilog=SEARCH_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. conf=search_demo search.trials=12 search.sampler=random")
    p.add_argument("--trials", type=int, metavar="N", help="total trials of the study (same as search.trials=N)")
    p.add_argument("--out", metavar="DIR", help="run directory: result store, study.sqlite, search.md, logs (default: reports/runs/<name>)")
    p.add_argument("--allow-unknown-vars", action="store_true", help="let site-specific variables outside the catalogs through")
    p.add_argument("--dry-run", action="store_true", help="print the space, objectives and settings; launch and write nothing")
    p.add_argument("--allow-ignored-vars", action="store_true",
                   help="search even when the backend reads none of the searched variables (the result will be noise)")
    p.set_defaults(func=cmd_search)


def search_overrides(overrides: Sequence[str]) -> list[str]:
    """``search.x=v`` -> ``++search.x=v``: keys under the free-form ``search:`` mapping may be new."""
    return [f"++{o}" if o.startswith("search.") else o for o in overrides]


def prepare_search(args: argparse.Namespace) -> dict[str, Any]:
    from omegaconf import OmegaConf

    from envmatrix.catalog import load_catalog
    from envmatrix.config import compose_config
    from envmatrix.config.resolve import resolve
    from envmatrix.env.merge import caller_pins
    from envmatrix.execution.hostinfo import gpu_inventory
    from envmatrix.search.objective import parse_objectives
    from envmatrix.search.space import parse_search_space
    from envmatrix.search.study import parse_settings

    gpus = gpu_inventory()
    pins = caller_pins()
    cfg, conf_file = compose_config(search_overrides(args.overrides))
    data = OmegaConf.to_container(cfg, resolve=True)
    if not data.get("setups") and not data.get("strategies"):
        data["setups"] = {"default": {}}  # search needs no setups; resolve() wants one
    catalog = load_catalog()
    inp = resolve(OmegaConf.create(data), conf_file, len(gpus), pins, allow_unknown=args.allow_unknown_vars, catalog=catalog)
    search = dict(data.get("search") or {})
    if args.trials is not None:
        search["trials"] = args.trials
    where = f"{conf_file.name}: search"
    settings = parse_settings(search, where, inp.name, inp.seed)
    space = parse_search_space(search, catalog, pins, where, allow_unknown=args.allow_unknown_vars)
    objectives = parse_objectives(search.get("objective"), f"{where}.objective", [g.label for g in inp.grids])
    return {"inp": inp, "settings": settings, "space": space, "objectives": objectives, "gpus": gpus, "pins": pins}


def cmd_search(args: argparse.Namespace) -> int:
    from envmatrix.cli.common import make_console

    console = make_console()
    ctx = prepare_search(args)
    inp, settings, space, objectives = ctx["inp"], ctx["settings"], ctx["space"], ctx["objectives"]
    from envmatrix.catalog.backends import check_varied

    # a search over variables the backend never reads would crown noise (issue 22): refused, or one warning line
    auto = str(inp.config.get("backend", "auto")) == "auto"
    warning = check_varied(inp.backend, space.vars, "search", allow=args.allow_ignored_vars or auto, probe=inp.probe.name)
    if warning:
        print(f"envmatrix: {warning}", file=sys.stderr)
    if args.dry_run:
        return _print_dry_run(console, inp, settings, space, objectives)

    optuna = require("optuna", "search", "envmatrix search")

    from envmatrix.engine import open_session
    from envmatrix.search.evaluate import ProbeEvaluator
    from envmatrix.search.report import build_report, print_report, render_markdown
    from envmatrix.search.study import (
        BASELINE_ATTR, SearchAborted, _redact, make_sampler, make_storage, open_study, run_search,
    )

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    run_dir = em_paths.run_dir(args.out, inp.name)
    url = settings.storage or f"sqlite:///{os.path.join(run_dir, 'study.sqlite')}"
    storage = make_storage(url)
    sampler = make_sampler(settings.sampler, settings.seed, len(space.allowed_rows()), space)
    grids = [g.label for g in inp.grids]
    meta = {"space": space.to_json(), "objectives": [o.to_json() for o in objectives], "grids": grids,
            "backend": inp.backend, "probe": inp.probe.to_json(), "conf_file": str(inp.conf_file)}
    study = open_study(storage, settings.study_name, [o.direction for o in objectives], sampler, meta)
    sweep_id = f"search-{settings.study_name}"
    console.print(f"search {settings.study_name}: {len(space.allowed_rows())} allowed combinations of {', '.join(space.vars)}; "
                  f"trials={settings.trials}, sampler {settings.sampler} (seed {settings.seed}), grids {', '.join(grids)}; "
                  f"storage {_redact(url)}", markup=False)
    aborted = None
    with open_session(inp, run_dir, ctx["pins"], len(ctx["gpus"]), sweep_id=sweep_id, pool=True) as session:
        session.store.open_sweep(sweep_id, {"config": inp.config, "conf_file": str(inp.conf_file), "study": settings.study_name})
        evaluator = ProbeEvaluator(session, inp.grids, objectives)
        if settings.baseline and BASELINE_ATTR not in study.user_attrs:
            from envmatrix.env.atoms import Setup

            console.print("baseline: the default env (empty setup) on " + ", ".join(grids), markup=False)
            out = evaluator.measure("baseline", Setup("default", (), origin="baseline"))
            base = {"values": out.values, "per_grid": out.attrs.get("per_grid"), "failed": out.failed,
                    "failure_class": out.failure_class, "root_cause": out.root_cause, "metrics": out.attrs.get("metrics")}
            study.set_user_attr(BASELINE_ATTR, base)
        try:
            stats = run_search(study, space, objectives, evaluator, settings, listener=_Lines(console, space))
            console.print(f"stopped: {stats.stop_reason}; this worker probed {stats.probed}, reused {stats.cached}, "
                          f"skipped {stats.forbidden} forbidden samples, recovered {len(stats.recovered)} stale trials", markup=False)
        except SearchAborted as exc:
            aborted = exc
        if aborted is None and settings.confirm_top_k:
            _confirm_winner(console, study, space, objectives, evaluator, settings)
    report = build_report(study, settings.top_k, storage_hint=_redact(url))
    md = os.path.join(run_dir, "search.md")
    with open(md, "w") as fh:
        fh.write(render_markdown(report))
    print_report(console, report)
    console.print(f"report: {md}; store {os.path.join(run_dir, 'results.sqlite')}", markup=False)
    console.print(f"export: envmatrix export {'--out ' + run_dir if not settings.storage else '--storage ' + _redact(url)} "
                  f"--study-name {settings.study_name}", markup=False)
    console.print(f"dashboard: optuna-dashboard {_redact(url)}", markup=False)
    from envmatrix.reporting.html import after_command

    after_command(run_dir, console)
    if aborted is not None:
        raise aborted
    return 0


def _confirm_winner(console: Any, study: Any, space: Any, objectives: Any, evaluator: Any, settings: Any) -> None:
    """Re-measure the top trials and the default env in interleaved rounds; the verdict goes to the study."""
    from envmatrix.env.atoms import Setup
    from envmatrix.search.confirm import CONFIRM_ATTR, DEFAULT, confirm, to_json
    from envmatrix.search.export import ranked

    top, seen = [], set()
    for t in ranked(study, objectives):
        key = tuple(sorted(t.params.items()))
        if key not in seen:
            seen.add(key)
            top.append(t)
    top = top[:settings.confirm_top_k]
    if not top:
        return
    by_number = {t.number: t for t in top}
    labels = [t.number for t in top] + ([DEFAULT] if settings.baseline else [])
    sign = 1.0 if objectives[0].direction == "maximize" else -1.0

    def measure(rnd: int, label: Any) -> Any:
        name = "default" if label == DEFAULT else f"t{label:04d}"
        setup = Setup("default", (), origin="baseline") if label == DEFAULT else space.setup_of_params(by_number[label].params)
        out = evaluator.measure(f"confirm{rnd}_{name}", setup)
        return None if out.failed else out.values[0]

    console.print(f"confirm: re-measuring trials {', '.join(str(t.number) for t in top)}"
                  f"{' and the default env' if settings.baseline else ''} in interleaved rounds", markup=False)
    result = confirm(labels, measure, sign, settings.confirm_repeats, settings.confirm_max_repeats)
    data = to_json(result, sign)
    study.set_user_attr(CONFIRM_ATTR, data)
    for row in data["ranking"]:
        who = "default env" if row["label"] == DEFAULT else f"trial {row['label']}"
        if row["median"] is None:
            console.print(f"  {who}: every repeat failed", markup=False)
            continue
        failed = f", {row['failed']} failed" if row["failed"] else ""
        console.print(f"  {who}: median {row['median']:.4g} [{row['low']:.4g} .. {row['high']:.4g}] spread {row['spread']:.1%} "
                      f"over {len(row['values'])} repeats{failed}", markup=False)
    console.print(f"confirmed after {data['repeats']} rounds: {data['reason']}", markup=False)


class _Lines:
    def __init__(self, console: Any, space: Any) -> None:
        self.console, self.space = console, space

    def __call__(self, event: str, trial: Any, outcome: Any) -> None:
        if event != "result":
            return
        params = " ".join(f"{k}={v}" for k, v in trial.params.items())
        if outcome.failed:
            verdict = f"FAIL {outcome.failure_class}: {(outcome.root_cause or '')[:160]}"
        else:
            verdict = ", ".join(f"{v:.4g}" for v in outcome.values)
        cached = f" (= trial {outcome.attrs['cached_from']})" if "cached_from" in outcome.attrs else ""
        self.console.print(f"trial {trial.number}: {params} -> {verdict}{cached}", markup=False)


def _print_dry_run(console: Any, inp: Any, settings: Any, space: Any, objectives: Any) -> int:
    from rich.table import Table
    from rich.text import Text

    console.print(f"search {settings.study_name}: grids {', '.join(g.label for g in inp.grids)}, backend {inp.backend}, "
                  f"probe {inp.probe.name}; trials={settings.trials}, sampler {settings.sampler}, seed {settings.seed}", markup=False)
    table = Table(title=f"space: {space.size} combinations, {len(space.allowed_rows())} allowed")
    table.add_column("variable")
    table.add_column("values", overflow="fold")
    for var in space.vars:
        table.add_row(var, Text(", ".join("unset" if v is None else v for v in space.choices(var))))
    for atom in space.fixed.atoms:
        table.add_row(Text(f"{atom.var} (fixed)"), Text(str(atom)))
    console.print(table)
    for entry in space.to_json()["forbid"]:
        console.print(Text("forbid: " + ", ".join(f"{k}={v}" for k, v in entry.items())))
    for o in objectives:
        console.print(Text(f"objective {o.name}: {o.direction} {o.metric} of {', '.join(o.collectives)} at "
                           f"{', '.join('max' if s is None else str(s) for s in o.sizes)} B"))
    return 0
