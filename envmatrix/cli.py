"""Command line: ``envmatrix sweep [flags] [hydra overrides]``.

Config content comes as Hydra overrides (``conf=aws_ofi grids=[1x2,2x2]``);
operational switches are flags. Errors are one line, exit 2 for bad input;
``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import traceback
from typing import Optional, Sequence

from envmatrix import paths as em_paths
from envmatrix.errors import EXIT_FAILURES, EXIT_INCONCLUSIVE, EXIT_INTERRUPTED, EXIT_OK, ConfigError, EnvmatrixError

EXIT_CODES = """exit codes (the same for sweep, bench, bisect, search, diff):
  0    all passed / nothing to do
  1    failures found: cells failed, culprits named, regressions
  2    usage or bad input: nothing launched or written
  3    inconclusive: flaky, probe budget spent, unresolved
  130  interrupted (Ctrl-C); completed results stay in the store
"""
from envmatrix.bench.timing import DEFAULT_TIMING, TIMINGS

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
    p.set_defaults(func=cmd_sweep)


def _bench_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="nccl-tests-like busbw for one setup on one grid",
        description="Time value-checked collectives over a size sweep for one env on one grid, like nccl-tests; "
        "busbw uses nccl-tests' per-collective factors. Results go to the store; tables to screen and Markdown.",
        epilog="examples:\n  envmatrix bench --grid 1x4 -b 64M -e 1G -f 4 -c allreduce,allgather,alltoall\n"
        "  envmatrix bench conf=aws_ofi --setup 2 --grid 2x2\n  envmatrix bench --env NCCL_ALGO=Ring --env NCCL_PROTO=Simple",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides choosing the config (conf=..., backend=...)")
    p.add_argument("--grid", help="NxP (default: the config's first grid)")
    p.add_argument("--setup", help="a setup of the config (default: the inherited env only)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra variable on top of the setup (repeatable)")
    p.add_argument("-c", "--collectives", default="allreduce,allgather,alltoall", help="comma list (allreduce, allgather, reduce_scatter, alltoall, broadcast, reduce, sendrecv, p2p, ps_central, ps_sharded)")
    p.add_argument("-b", "--min-bytes", default="8", help="smallest size (default 8)")
    p.add_argument("-e", "--max-bytes", default=None, help="largest size (default 1G on GPUs, 1M on CPU)")
    p.add_argument("-f", "--factor", type=float, default=2.0, help="size multiplication factor (default 2)")
    p.add_argument("-i", "--step-bytes", default=None, help="additive size step instead of a factor")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed iterations per size (default 20)")
    p.add_argument("-w", "--warmup", type=int, default=5, help="warmup iterations per size (default 5)")
    p.add_argument("-d", "--dtype", default="float32", help="float32, float16, bfloat16 or int32")
    p.add_argument("--no-check", action="store_true", help="skip the #wrong check (nccl-tests -c 0)")
    p.add_argument("--timing", choices=tuple(TIMINGS), default=DEFAULT_TIMING,
                   help="; ".join(f"{k}: {v}" for k, v in TIMINGS.items()))
    p.add_argument("--timeout", type=float, default=600.0, help="probe timeout in seconds (default 600)")
    p.add_argument("--backends", metavar="LIST", help="e.g. gloo,nccl: the same bench on each backend, side by side (seed 000)")
    p.add_argument("--out", metavar="DIR", help="run directory (default: reports/runs/bench)")
    p.add_argument("--allow-unknown-vars", action="store_true", help="let site-specific variables through")
    p.add_argument("--rerun", action="store_true", help="measure again even if the store has this exact run")
    p.set_defaults(func=cmd_bench)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="envmatrix", description="NCCL environment-configuration fuzzer and regression bisector.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _sweep_parser(sub)
    _bench_parser(sub)
    from envmatrix.cli_bisect import add_parsers as add_bisect
    from envmatrix.cli_search import add_parsers as add_search

    from envmatrix.cli_cluster import add_parsers as add_cluster

    add_bisect(sub)
    add_search(sub)
    add_cluster(sub)
    __import__("envmatrix.cli_report").cli_report.add_parsers(sub)
    from envmatrix.cli_configs import add_parsers as add_configs; add_configs(sub)  # noqa: E702
    for p in sub.choices.values():
        # Global flags work after the subcommand too; SUPPRESS keeps a top-level --debug from being reset.
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
        p.epilog = f"{p.epilog.rstrip()}\n\n{EXIT_CODES}" if p.epilog else EXIT_CODES
        p.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXIT_CODES
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
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


def make_console():
    from rich.console import Console

    console = Console()
    # Logs and pipes get wide tables instead of rich's 80-column fallback.
    return console if console.is_terminal else Console(width=int(os.environ.get("COLUMNS", 160)))


def cmd_sweep(args: argparse.Namespace) -> int:
    from envmatrix.hostinfo import host_facts
    from envmatrix.reporting import build_matrix, write_reports
    from envmatrix.reporting.console import LiveProgress, matrix_tables
    from envmatrix.store import open_store
    from envmatrix.store.lock import exclusive
    from envmatrix.planning.packing import parse_jobs
    from envmatrix.sweep import plan_sweep, run_sweep

    from envmatrix.catalog.backends import check_varied

    from envmatrix.store.sqlite import check_not_corrupt

    console = make_console()
    inp, gpus, pins = _prepare(args)
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
        from envmatrix.sweep import dry_run

        host = host_facts(with_topology=False) if inp.hermetic else {}
        launches = dry_run(inp, runs, run_dir, os.environ, inp.probe_environment(os.environ, host), pins, len(gpus))
        if args.json:
            print(json.dumps({"name": inp.name, "backend": inp.backend, "launcher": inp.launcher, "probe": inp.probe.name,
                              "conf_file": str(inp.conf_file), "out": run_dir, "runs": launches}, indent=1))
        else:
            print_plan(console, inp, runs, launches)
        return 0
    run_dir = em_paths.run_dir(args.out, inp.name)
    host = host_facts()
    environ = inp.probe_environment(os.environ, host)
    db = os.path.join(run_dir, "results.sqlite")
    with exclusive(db, args.command_line), open_store(em_paths.store_url(run_dir)) as store:
        listener = LiveProgress(console) if console.is_terminal else LineProgress(console)
        _, runs, results = run_sweep(
            inp, store, run_dir, environ, pins, len(gpus), host, rerun=args.rerun, listener=listener, pool=not args.no_pool, jobs=jobs
        )
    matrix = build_matrix(runs, results, [g.label for g in inp.grids])
    title = f"envmatrix sweep {inp.name} ({inp.backend}, probe {inp.probe.name})"
    paths = write_reports(run_dir, matrix, results, title)
    console.print(matrix_tables(matrix, title))
    passed, failed, missing = matrix.counts
    console.print(f"{passed} passed, {failed} failed, {missing} not run; store {os.path.join(run_dir, 'results.sqlite')}")
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


def cmd_bench(args: argparse.Namespace) -> int:
    from envmatrix.bench_cmd import prepare_bench, print_bench

    import dataclasses

    from envmatrix.bench_cmd import print_backends
    from envmatrix.config.resolve import resolve_backend
    from envmatrix.hostinfo import host_facts
    from envmatrix.store import open_store
    from envmatrix.store.lock import exclusive
    from envmatrix.sweep import run_sweep

    console = make_console()
    base, gpus, pins = _prepare(args)
    backends = [b.strip() for b in (args.backends or base.backend).split(",") if b.strip()]
    inputs = [prepare_bench(dataclasses.replace(base, backend=resolve_backend(b, len(gpus))), args, len(gpus)) for b in backends]
    run_dir = em_paths.run_dir(args.out, "bench")
    results, code = [], 0
    db = os.path.join(run_dir, "results.sqlite")
    with exclusive(db, args.command_line), open_store(em_paths.store_url(run_dir)) as store:
        for inp in inputs:
            host = host_facts()
            environ = inp.probe_environment(os.environ, host)
            _, _, done = run_sweep(inp, store, run_dir, environ, pins, len(gpus), host, rerun=args.rerun, listener=LineProgress(console, "bench"))
            results.append(done[-1])
            code = max(code, print_bench(console, done[-1], run_dir))
    if len(results) > 1:
        print_backends(console, results, run_dir)
    from envmatrix.reporting.html import after_command

    after_command(run_dir, console)
    return code


class LineProgress:
    """Plain progress lines when stdout is not a terminal (CI logs, pipes)."""

    def __init__(self, console, command: str = "sweep") -> None:
        self.console, self.command = console, command

    def __call__(self, event, progress, result) -> None:
        if event == "start":
            runs = "run" if progress.total == 1 else "runs"
            self.console.print(f"{self.command}: {progress.total} {runs}, {progress.skipped} already in the store")
        elif result is not None:
            from envmatrix.reporting.console import clip_words, eta_suffix

            mark = "pass" if result.passed else clip_words(f"{result.outcome}: {result.root_cause.get('line') or ''}", 200)
            n = progress.done + progress.skipped
            self.console.print(f"[{n}/{progress.total}] ({result.setup_name}) {result.grid} {mark}{eta_suffix(progress)}",
                               markup=False, soft_wrap=True)  # one grep-able line per run in CI logs


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # Overrides may sit on both sides of flags (argparse takes one block of positionals).
    stray = [item for item in extra if item.startswith("-") or "=" not in item or not hasattr(args, "overrides")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    words = list(sys.argv[1:] if argv is None else argv)
    args.command_line = shlex.join(["envmatrix", *words])
    previous = _on_sigint(_first_interrupt)
    try:
        return args.func(args)
    except EnvmatrixError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"envmatrix: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        # --rerun would measure everything again; resuming means the same command without it.
        resume = shlex.join(["envmatrix", *(w for w in words if w != "--rerun")])
        print(f"envmatrix: interrupted; finished runs are in the store, resume with: {resume}", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        _on_sigint(previous)


def _first_interrupt(signum, frame):
    # The unwinding that follows kills the ranks' process groups; if it hangs, a second Ctrl-C
    # leaves at once (ranks die with us through PR_SET_PDEATHSIG, the store is transactional).
    _on_sigint(_second_interrupt)
    raise KeyboardInterrupt


def _second_interrupt(signum, frame):
    os.write(2, b"envmatrix: interrupted again; leaving now\n")
    os._exit(EXIT_INTERRUPTED)


def _on_sigint(handler):
    try:
        return signal.signal(signal.SIGINT, handler)
    except (ValueError, TypeError):  # not the main thread, or no handler to restore
        return None


if __name__ == "__main__":
    sys.exit(main())
