"""Command line: ``envmatrix sweep [flags] [hydra overrides]``.

Config content comes as Hydra overrides (``conf=aws_ofi grids=[1x2,2x2]``);
operational switches are flags. Errors are one line, exit 2 for bad input;
``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Optional, Sequence

from envmatrix.errors import EnvmatrixError

EXAMPLES = """examples:
  envmatrix sweep                                   # embedded default on this host
  envmatrix sweep conf=aws_ofi.yaml grids=[1x4,2x2] # seed 003's setups
  envmatrix sweep conf=/path/my.yaml backend=gloo probe.timeout_s=60 --dry-run
"""


def _sweep_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run every setup on every node x ppn grid and build the pass/fail matrix",
        description="Run every setup of a config on every grid with a probe per rank; store each result at once; "
        "print the seed-003 matrix. Config content is given as Hydra overrides.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. conf=aws_ofi grids=[1x2,2x2] backend=gloo probe.timeout_s=60")
    p.add_argument("--dry-run", action="store_true", help="print the plan (setups x grids and each env); launch and write nothing")
    p.add_argument("--out", metavar="DIR", help="run directory for the store and reports (default: reports/runs/<name>)")
    p.add_argument("--allow-unknown-vars", action="store_true", help="let site-specific variables outside the catalogs through")
    p.add_argument("--rerun", action="store_true", help="run again what the store already holds (new attempts; history is kept)")
    p.add_argument("--fail-on-failure", action="store_true", help="exit 1 if any probe failed")
    p.set_defaults(func=cmd_sweep)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="envmatrix", description="NCCL environment-configuration fuzzer and regression bisector.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _sweep_parser(sub)
    return parser


def _prepare(args: argparse.Namespace):
    from envmatrix.config import compose_config
    from envmatrix.config.resolve import resolve
    from envmatrix.env.merge import caller_pins
    from envmatrix.hostinfo import gpu_inventory

    gpus = gpu_inventory()
    pins = caller_pins()
    cfg, conf_file = compose_config(args.overrides)
    inp = resolve(cfg, conf_file, len(gpus), pins, allow_unknown=args.allow_unknown_vars)
    return inp, gpus, pins


def print_plan(console, inp, runs) -> None:
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


def cmd_sweep(args: argparse.Namespace) -> int:
    from rich.console import Console

    from envmatrix.hostinfo import host_facts
    from envmatrix.reporting import build_matrix, write_reports
    from envmatrix.reporting.console import LiveProgress, matrix_tables
    from envmatrix.store import open_store
    from envmatrix.sweep import plan_sweep, run_sweep

    console = Console()
    inp, gpus, pins = _prepare(args)
    runs = plan_sweep(inp)
    if args.dry_run:
        print_plan(console, inp, runs)
        return 0
    run_dir = os.path.abspath(args.out or os.path.join("reports", "runs", inp.name))
    os.makedirs(run_dir, exist_ok=True)
    with open_store(f"sqlite:///{os.path.join(run_dir, 'results.sqlite')}") as store:
        listener = LiveProgress(console) if console.is_terminal else LineProgress(console)
        _, runs, results = run_sweep(
            inp, store, run_dir, dict(os.environ), pins, len(gpus), host_facts(), rerun=args.rerun, listener=listener
        )
    matrix = build_matrix(runs, results)
    title = f"envmatrix sweep {inp.name} ({inp.backend}, probe {inp.probe.name})"
    paths = write_reports(run_dir, matrix, results, title)
    console.print(matrix_tables(matrix, title))
    passed, failed, missing = matrix.counts
    console.print(f"{passed} passed, {failed} failed, {missing} not run; store {os.path.join(run_dir, 'results.sqlite')}")
    console.print("reports: " + ", ".join(paths))
    return 1 if (args.fail_on_failure and failed) else 0


class LineProgress:
    """Plain progress lines when stdout is not a terminal (CI logs, pipes)."""

    def __init__(self, console) -> None:
        self.console = console

    def __call__(self, event, progress, result) -> None:
        if event == "start":
            self.console.print(f"sweep: {progress.total} runs, {progress.skipped} already in the store")
        elif result is not None:
            mark = "pass" if result.passed else f"{result.outcome}: {result.root_cause.get('line') or ''}"[:200]
            n = progress.done + progress.skipped
            self.console.print(f"[{n}/{progress.total}] ({result.setup_name}) {result.grid} {mark}", markup=False)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except EnvmatrixError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"envmatrix: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("envmatrix: interrupted; completed results are in the store, rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
