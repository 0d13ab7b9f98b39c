"""``envmatrix sweep``: every setup on every node x ppn grid, the pass/fail matrix.

Config content comes as Hydra overrides (``conf=aws_ofi grids=[1x2,2x2]``); operational switches are flags.
"""

from __future__ import annotations

import argparse
import json
import sys

from envmatrix.cli.common import (LineProgress, add_command, add_emulate_hosts_flag, add_network_flag, add_threshold_flags,
                                  make_console, print_outputs, print_shaping_missed, request_from)
from envmatrix.errors import EXIT_OK

EXAMPLES = """examples:
  envmatrix sweep                                   # embedded default on this host
  envmatrix sweep conf=aws_ofi.yaml grids=[1x4,2x2] # seed 003's setups
  envmatrix sweep conf=/path/my.yaml backend=gloo probe.timeout_s=60 --dry-run
  envmatrix sweep conf=my_cluster.yaml --network default --network b1:rate=1gbit   # docs/network.md
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    # `duplicates` pairs this call with bisect's: alike in shape only, each passes its own texts to the one helper.
    p = add_command(sub, "sweep", "run every setup on every node x ppn grid and build the pass/fail matrix",
                    "Run every setup of a config on every grid with a probe per rank; store each result at once; "
                    "print the seed-003 matrix. Config content is given as Hydra overrides.", EXAMPLES,
                    overrides="Hydra overrides, e.g. conf=aws_ofi grids=[1x2,2x2] backend=gloo probe.timeout_s=60",
                    out="run directory for the store and reports (default: reports/runs/<name>)")
    p.add_argument("--dry-run", action="store_true", help="print the plan (setups x grids, each env) and every run's exact "
                   "launch command, shell-quoted; launch and write nothing")
    p.add_argument("--json", action="store_true", help="with --dry-run: the plan as JSON (argv lists, env changes, shell lines)")
    p.add_argument("--rerun", action="store_true", help="run again what the store already holds (new attempts; history is kept)")
    p.add_argument("--allow-ignored-vars", action="store_true",
                   help="run even when the backend reads none of the varied variables (e.g. to check env delivery)")
    p.add_argument("--fail-on-failure", action="store_true",
                   help="deprecated no-op: a failed cell now always exits 1 (see exit codes)")
    p.add_argument("--junit", metavar="PATH", help="also write JUnit XML: one testcase per (setup, grid), the root-cause line as message")
    p.add_argument("--jobs", default="1", metavar="N|auto", help="runs side by side on disjoint GPU sets (CPU: bounded by cores); auto never packs bench probes")
    p.add_argument("--no-pool", action="store_true", help="start every rank cold (no warm pool of torch-imported forks)")
    add_network_flag(p)
    add_threshold_flags(p)
    add_emulate_hosts_flag(p)
    p.set_defaults(func=cmd_sweep)


def print_plan(console, inp, runs, launches=()) -> None:
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    console.print(
        f"[bold]{inp.name}[/bold]: {len(inp.setups)} setups x {len(inp.grids)} grids"
        f"{f' x {len(inp.conditions)} network conditions' if inp.conditions else ''} = {len(runs)} runs; "
        f"backend {inp.backend}, launcher {inp.launcher}, probe {inp.probe.name}, conf {escape(str(inp.conf_file))}"
    )
    setups = Table(title="setups")
    setups.add_column("setup")
    setups.add_column("env (applied on top of the inherited env)", overflow="fold")
    for s in inp.setups:
        setups.add_row(Text(f"({s.name})"), Text("\n".join(s.shell_lines()) or "(inherited env only)"))
    console.print(setups)
    plan = Table(title="runs")
    network = any(r.network is not None for r in runs)
    for col in ("#", "grid", "setup") + (("network",) if network else ()) + ("run key",):
        plan.add_column(col)
    for i, r in enumerate(runs, 1):
        where = (Text(f"{r.network.name} ({r.network.describe()})"),) if network else ()
        plan.add_row(str(i), r.grid.label, Text(f"({r.setup.name})"), *where, r.key)
    console.print(plan)
    for launch in launches:
        console.print(Text(f"# run {launch['index']}/{len(runs)}: ({launch['setup']}) {launch['grid']} key {launch['run_key']}, "
                           f"launcher {launch['launcher']}"), soft_wrap=True)
        console.print(Text(launch["shell"]), soft_wrap=True, highlight=False)


def cmd_sweep(args: argparse.Namespace) -> int:
    from envmatrix.app.sweep import SweepPlan, SweepRequest, sweep

    console = make_console()
    request = request_from(SweepRequest, args, pool=not args.no_pool)
    if console.is_terminal:
        from envmatrix.reporting.console import LiveProgress

        listener = LiveProgress(console)
    else:
        listener = LineProgress(console)
    done = sweep(request, listener, warn=lambda line: print(f"envmatrix: {line}", file=sys.stderr))
    if isinstance(done, SweepPlan):
        print_dry_run(console, done, request.json)
        return EXIT_OK
    print_sweep(console, done)
    return done.exit_code


def print_dry_run(console, plan, as_json: bool) -> None:
    inp = plan.inp
    if as_json:
        print(json.dumps({"name": inp.name, "backend": inp.backend, "launcher": inp.launcher, "probe": inp.probe.name,
                          "conf_file": str(inp.conf_file), "out": plan.run_dir, "runs": plan.launches}, indent=1))
    else:
        print_plan(console, inp, plan.runs, plan.launches)
    if plan.note:
        print(f"envmatrix: {plan.note}", file=sys.stderr)


def print_sweep(console, done) -> None:
    from envmatrix.reporting.console import matrix_tables

    console.print(matrix_tables(done.matrix, done.title, done.results))
    # the line counts this sweep's runs, as its exit code and JUnit do; the matrix above shows the whole store
    passed = sum(r.passed for r in done.results)
    slow = sum(r.outcome == "slow" for r in done.results)
    # an unresolved run (probe exit 125) is inconclusive, not a failure: exit 3, not 1 (sweep_exit_code)
    unresolved = sum(r.outcome == "unresolved" for r in done.results)
    failed = len(done.results) - passed - unresolved
    missing = len(done.runs) - len(done.results)
    failed_text = f"{failed} failed ({slow} slow)" if slow else f"{failed} failed"
    if unresolved:
        failed_text += f", {unresolved} unresolved (inconclusive)"
    shown = sum(r is not None for r in done.matrix.cells.values())
    others = f" (the matrix shows all {shown} cells of the store)" if shown > len(done.results) else ""
    console.print(f"{passed} passed, {failed_text}, {missing} not run{others}; store {done.store_path}")
    if done.inp.conditions:
        from envmatrix.reporting.conditions_tables import conditions_markdown

        console.print(conditions_markdown(done.results), markup=False, soft_wrap=True)
    print_shaping_missed(console, done.shaping_missed)
    console.print("reports: " + ", ".join(done.reports))
    print_outputs(console, done.outputs)
