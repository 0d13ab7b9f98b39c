"""``envmatrix search``: the best-busbw env by Optuna ask/tell (app.search runs it; this module parses and prints)."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from envmatrix.cli.common import add_command, add_emulate_hosts_flag, make_console, print_outputs, request_from

SEARCH_EXAMPLES = """examples:
  envmatrix search conf=search_demo                        # structured sampler, SQLite study in reports/runs/<name>/
  envmatrix search conf=search_h200 search.trials=40 search.sampler=random search.seed=3
  envmatrix search conf=search_h200 --trials 40 search.storage=postgresql://user@db/envmatrix search.study_name=h200
  envmatrix export --out reports/runs/search_demo          # best.sh, best_setup.yaml, tuner.csv
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "search", "find the best-busbw env with Optuna (ask/tell); a fleet of workers can share one study",
                    "Sample setups from the config's search.space (catalog-checked; search.fixed pinned, search.forbid never "
                    "launched), probe + bench each on the config's grids, tell Optuna the objective (search.objective). Every result "
                    "also goes to the run directory's store. Config content is given as Hydra overrides (search.trials=40).",
                    SEARCH_EXAMPLES,
                    overrides="Hydra overrides, e.g. conf=search_demo search.trials=12 search.sampler=random",
                    out="run directory: result store, study.sqlite, search.md, logs (default: reports/runs/<name>)")
    p.add_argument("--trials", type=int, metavar="N", help="total trials of the study (same as search.trials=N)")
    p.add_argument("--dry-run", action="store_true", help="print the space, objectives and settings; launch and write nothing")
    p.add_argument("--allow-ignored-vars", action="store_true",
                   help="search even when the backend reads none of the searched variables (the result will be noise)")
    add_emulate_hosts_flag(p)
    p.set_defaults(func=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    from envmatrix.app.search import SearchEvents, SearchPlan, SearchRequest, search

    console = make_console()
    events = SearchEvents(line=lambda text: console.print(text, markup=False), trial=TrialLines(console),
                          warn=lambda line: print(f"envmatrix: {line}", file=sys.stderr))
    done = search(request_from(SearchRequest, args), events)
    if isinstance(done, SearchPlan):
        print_dry_run(console, done)
        return 0
    from envmatrix.search.summary import print_report

    if done.confirmed:
        print_confirmed(console, done.confirmed)
    print_report(console, done.report)
    settings, run_dir = done.plan.settings, done.outputs.run_dir
    console.print(f"report: {done.markdown}; store {done.store_path}", markup=False)
    # lines to paste into a shell: a run directory or storage URL with a space or a quote stays one word
    where = ["--out", run_dir] if not settings.storage else ["--storage", done.storage]
    console.print("export: " + shlex.join(["envmatrix", "export", *where, "--study-name", settings.study_name]), markup=False)
    console.print(f"dashboard: optuna-dashboard {shlex.quote(done.storage)}", markup=False)
    print_outputs(console, done.outputs)
    if done.aborted is not None:
        raise done.aborted
    return 0


def print_confirmed(console: Any, data: dict) -> None:
    from envmatrix.search.confirm import DEFAULT

    for row in data["ranking"]:
        who = "default env" if row["label"] == DEFAULT else f"trial {row['label']}"
        if row["median"] is None:
            console.print(f"  {who}: every repeat failed", markup=False)
            continue
        failed = f", {row['failed']} failed" if row["failed"] else ""
        console.print(f"  {who}: median {row['median']:.4g} [{row['low']:.4g} .. {row['high']:.4g}] spread {row['spread']:.1%} "
                      f"over {len(row['values'])} repeats{failed}", markup=False)
    console.print(f"confirmed after {data['repeats']} rounds: {data['reason']}", markup=False)


class TrialLines:
    """One line per finished trial: its parameters and objective values (or its failure)."""

    def __init__(self, console: Any) -> None:
        self.console = console

    def __call__(self, event: str, trial: Any, outcome: Any) -> None:
        if event != "result":
            return
        from envmatrix.search.screen import SCREEN_ATTR
        from envmatrix.search.summary import params_line

        params = params_line(trial)
        if outcome.failed:
            verdict = f"FAIL {outcome.failure_class}: {(outcome.root_cause or '')[:160]}"
        elif outcome.screened:
            record = outcome.attrs[SCREEN_ATTR]
            verdict = f"screened: {record['value']:.4g} at {record['fidelity']}, below search.screen.keep of the best cheap value"
        else:
            verdict = ", ".join(f"{v:.4g}" for v in outcome.values)
        cached = f" (= trial {outcome.attrs['cached_from']})" if "cached_from" in outcome.attrs else ""
        self.console.print(f"trial {trial.number}: {params} -> {verdict}{cached}", markup=False)


def print_dry_run(console: Any, plan: Any) -> None:
    from rich.table import Table
    from rich.text import Text

    inp, settings, space, objectives = plan.inp, plan.settings, plan.space, plan.objectives
    console.print(f"search {settings.study_name}: grids {', '.join(g.label for g in inp.grids)}, backend {inp.backend}, "
                  f"probe {inp.probe.name}; trials={settings.trials}, sampler {settings.sampler}, seed {settings.seed}"
                  + (f"; screen: {settings.screen.describe()}" if settings.screen else ""), markup=False)
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
