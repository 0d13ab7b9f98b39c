"""``envmatrix sweep``: every setup on every node x ppn grid, the pass/fail matrix.

Config content comes as Hydra overrides (``conf=aws_ofi grids=[1x2,2x2]``); operational switches are flags.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from envmatrix import paths as em_paths
from envmatrix.cli.common import LineProgress, add_threshold_flags, make_console, prepare
from envmatrix.errors import EXIT_FAILURES, EXIT_INCONCLUSIVE, EXIT_OK, ConfigError

EXAMPLES = """examples:
  envmatrix sweep                                   # embedded default on this host
  envmatrix sweep conf=aws_ofi.yaml grids=[1x4,2x2] # seed 003's setups
  envmatrix sweep conf=/path/my.yaml backend=gloo probe.timeout_s=60 --dry-run
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run every setup on every node x ppn grid and build the pass/fail matrix",
        description="Run every setup of a config on every grid with a probe per rank; store each result at once; "
        "print the seed-003 matrix. Config content is given as Hydra overrides.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. conf=aws_ofi grids=[1x2,2x2] backend=gloo probe.timeout_s=60")
    p.add_argument("--dry-run", action="store_true", help="print the plan (setups x grids, each env) and every run's exact "
                   "launch command, shell-quoted; launch and write nothing")
    p.add_argument("--json", action="store_true", help="with --dry-run: the plan as JSON (argv lists, env changes, shell lines)")
    p.add_argument("--out", metavar="DIR", help="run directory for the store and reports (default: reports/runs/<name>)")
    p.add_argument("--allow-unknown-vars", action="store_true", help="let site-specific variables outside the catalogs through")
    p.add_argument("--rerun", action="store_true", help="run again what the store already holds (new attempts; history is kept)")
    p.add_argument("--allow-ignored-vars", action="store_true",
                   help="run even when the backend reads none of the varied variables (e.g. to check env delivery)")
    p.add_argument("--fail-on-failure", action="store_true",
                   help="deprecated no-op: a failed cell now always exits 1 (see exit codes)")
    p.add_argument("--junit", metavar="PATH", help="also write JUnit XML: one testcase per (setup, grid), the root-cause line as message")
    p.add_argument("--jobs", default="1", metavar="N|auto", help="runs side by side on disjoint GPU sets (CPU: bounded by cores); auto never packs bench probes")
    p.add_argument("--no-pool", action="store_true", help="start every rank cold (no warm pool of torch-imported forks)")
    add_threshold_flags(p)
    p.set_defaults(func=cmd_sweep)


def print_plan(console, inp, runs, launches=()) -> None:
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    console.print(
        f"[bold]{inp.name}[/bold]: {len(inp.setups)} setups x {len(inp.grids)} grids = {len(runs)} runs; "
        f"backend {inp.backend}, launcher {inp.launcher}, probe {inp.probe.name}, conf {escape(str(inp.conf_file))}"
    )
    setups = Table(title="setups")
    setups.add_column("setup")
    setups.add_column("env (applied on top of the inherited env)", overflow="fold")
    for s in inp.setups:
        setups.add_row(Text(f"({s.name})"), Text("\n".join(s.shell_lines()) or "(inherited env only)"))
    console.print(setups)
    plan = Table(title="runs")
    for col in ("#", "grid", "setup", "run key"):
        plan.add_column(col)
    for i, r in enumerate(runs, 1):
        plan.add_row(str(i), r.grid.label, Text(f"({r.setup.name})"), r.key)
    console.print(plan)
    for launch in launches:
        console.print(Text(f"# run {launch['index']}/{len(runs)}: ({launch['setup']}) {launch['grid']} key {launch['run_key']}, "
                           f"launcher {launch['launcher']}"), soft_wrap=True)
        console.print(Text(launch["shell"]), soft_wrap=True, highlight=False)


def cmd_sweep(args: argparse.Namespace) -> int:
    from envmatrix.execution.pool import WarmPool, likely_ranks

    console = make_console()
    # The pool's servers import torch (seconds) while this process composes the config, plans and
    # opens the store; on bad input they are killed with the pool before any run is launched.
    pool = None if args.no_pool or args.dry_run else WarmPool.prestart(os.environ, likely_ranks(os.environ))
    try:
        return _sweep(args, console, pool)
    finally:
        if pool is not None:
            pool.close()


def _sweep(args: argparse.Namespace, console, pool) -> int:
    from envmatrix.execution.hostinfo import host_facts
    from envmatrix.reporting import build_matrix, write_reports
    from envmatrix.engine import open_session
    from envmatrix.reporting.console import LiveProgress, matrix_tables
    from envmatrix.reporting.html import preload_renderer
    from envmatrix.planning.packing import parse_jobs
    from envmatrix.app.sweep import plan_sweep, run_sweep

    from envmatrix.catalog.backends import check_varied

    from envmatrix.store.sqlite import check_not_corrupt

    inp, gpus, pins = prepare(args, args.baseline, args.tolerance)
    try:
        jobs = parse_jobs(args.jobs)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    # where results would go is checked first: those errors name the file, and nothing is created before them
    run_dir = em_paths.run_dir(args.out, inp.name, create=False)
    check_not_corrupt(os.path.join(run_dir, "results.sqlite"))
    atoms = [a for s in inp.setups for a in s.atoms]
    # backend=auto falling back to gloo on a GPU-less host is not the user's choice: warn, do not refuse.
    auto = str(inp.config.get("backend", "auto")) == "auto"
    warning = check_varied(inp.backend, atoms, "sweep", allow=args.allow_ignored_vars or auto,
                           probe=inp.probe.name)
    if warning:
        print(f"envmatrix: {warning}", file=sys.stderr)
    runs = plan_sweep(inp)
    if args.json and not args.dry_run:
        raise ConfigError("--json: only with --dry-run; allowed: --dry-run --json")
    if args.dry_run:
        from envmatrix.app.sweep import dry_run

        host = host_facts(with_topology=False) if inp.hermetic else {}
        launches = dry_run(inp, runs, run_dir, os.environ, inp.probe_environment(os.environ, host), pins, len(gpus))
        if args.json:
            print(json.dumps({"name": inp.name, "backend": inp.backend, "launcher": inp.launcher, "probe": inp.probe.name,
                              "conf_file": str(inp.conf_file), "out": run_dir, "runs": launches}, indent=1))
        else:
            print_plan(console, inp, runs, launches)
        return 0
    run_dir = em_paths.run_dir(args.out, inp.name)
    with open_session(inp, run_dir, pins, len(gpus), lock_for=args.command_line,
                      pool=pool if pool is not None else not args.no_pool, jobs=jobs) as session:
        listener = LiveProgress(console) if console.is_terminal else LineProgress(console)
        preload_renderer()  # the report's imports overlap the runs instead of following them
        _, runs, results = run_sweep(inp, session, rerun=args.rerun, listener=listener)
    matrix = build_matrix(runs, results, [g.label for g in inp.grids])
    title = f"envmatrix sweep {inp.name} ({inp.backend}, probe {inp.probe.name})"
    paths = write_reports(run_dir, matrix, results, title)
    console.print(matrix_tables(matrix, title, results))
    passed, failed, missing = matrix.counts
    slow = sum(r.outcome == "slow" for r in results)
    failed_text = f"{failed} failed ({slow} slow)" if slow else f"{failed} failed"
    console.print(f"{passed} passed, {failed_text}, {missing} not run; store {os.path.join(run_dir, 'results.sqlite')}")
    console.print("reports: " + ", ".join(paths))
    from envmatrix.reporting.html import after_command

    after_command(run_dir, console, args.junit, f"envmatrix.sweep.{inp.name}", results)
    return sweep_exit_code(results)


def sweep_exit_code(results) -> int:
    """1 when a cell failed, 3 when the only non-passing cells are unresolved (probe skipped, exit 125), else 0."""
    outcomes = {r.outcome for r in results}
    if outcomes - {"pass", "unresolved"}:
        return EXIT_FAILURES
    return EXIT_INCONCLUSIVE if "unresolved" in outcomes else EXIT_OK
