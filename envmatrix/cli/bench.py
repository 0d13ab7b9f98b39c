"""``envmatrix bench``: nccl-tests-like busbw for one setup on one grid, printed like nccl-tests."""

from __future__ import annotations

import argparse
import os
from typing import Any

from envmatrix import paths as em_paths
from envmatrix.bench.timing import DEFAULT_TIMING, TIMINGS
from envmatrix.cli.common import LineProgress, add_threshold_flags, make_console, prepare

def add_parser(sub: argparse._SubParsersAction) -> None:
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
    p.add_argument("-w", "--warmup", type=int, default=5, help="warmup iterations per size, all sizes (doubling from -b to -e) before the first timed one, as nccl-tests (default 5)")
    p.add_argument("-d", "--dtype", default="float32", help="float32, float16, bfloat16 or int32")
    p.add_argument("--no-check", action="store_true", help="skip the #wrong check (nccl-tests -c 0)")
    p.add_argument("--timing", choices=tuple(TIMINGS), default=DEFAULT_TIMING,
                   help="; ".join(f"{k}: {v}" for k, v in TIMINGS.items()))
    p.add_argument("--timeout", type=float, default=600.0, help="probe timeout in seconds (default 600)")
    p.add_argument("--backends", metavar="LIST", help="e.g. gloo,nccl: the same bench on each backend, side by side (seed 000)")
    p.add_argument("--out", metavar="DIR", help="run directory (default: reports/runs/bench)")
    p.add_argument("--allow-unknown-vars", action="store_true", help="let site-specific variables through")
    p.add_argument("--rerun", action="store_true", help="measure again even if the store has this exact run")
    add_threshold_flags(p)
    p.set_defaults(func=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    import dataclasses

    from envmatrix.app.bench import prepare_bench
    from envmatrix.config.resolve import ranks_elsewhere, resolve_backend
    from envmatrix.app.sweep import run_sweep
    from envmatrix.engine import open_session

    console = make_console()
    base, gpus, pins = prepare(args, args.baseline, args.tolerance)
    elsewhere = ranks_elsewhere(base.make_launcher())
    backends = [b.strip() for b in (args.backends or base.backend).split(",") if b.strip()]
    inputs = [prepare_bench(dataclasses.replace(base, backend=resolve_backend(b, len(gpus), elsewhere)), args, len(gpus)) for b in backends]
    run_dir = em_paths.run_dir(args.out, "bench")
    results, code = [], 0
    for inp in inputs:  # one session per backend: its environment and launcher follow the backend
        with open_session(inp, run_dir, pins, len(gpus), lock_for=args.command_line, pool=True) as session:
            _, _, done = run_sweep(inp, session, rerun=args.rerun, listener=LineProgress(console, "bench"))
        results.append(done[-1])
        code = max(code, print_bench(console, done[-1], run_dir))
    if len(results) > 1:
        print_backends(console, results, run_dir)
    from envmatrix.reporting.html import after_command

    after_command(run_dir, console)
    return code


def right_aligned_table(title: str, header: Any, rows: Any) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for col in header:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def print_bench(console: Any, result: Any, run_dir: str) -> int:
    from rich.text import Text

    from envmatrix.reporting.bench_tables import NCCL_TESTS_COLUMNS, bench_markdown, busbw_by_size, collective_title, nccl_tests_rows, timing_label

    title = f"envmatrix bench ({result.setup_name}) on {result.grid}, {result.backend}"
    for collective in dict.fromkeys(m["collective"] for m in result.metrics):
        console.print(right_aligned_table(collective_title(result.metrics, collective), NCCL_TESTS_COLUMNS, nccl_tests_rows(result.metrics, collective)))
    if result.metrics:
        console.print(right_aligned_table(f"busbw (GB/s) vs size ({timing_label(result.metrics)})", *busbw_by_size(result.metrics)))
    if result.thresholds:
        from envmatrix.reporting.bench_tables import threshold_rows

        console.print(right_aligned_table("expectations (measured / expected)", *threshold_rows(result.thresholds)))
    if not result.passed:
        console.print(Text(f"{result.outcome}: {result.root_cause.get('line')}", style="bold red"))
    path = os.path.join(run_dir, f"bench_{result.run_key}.md")
    with open(path, "w") as fh:
        fh.write(bench_markdown(result, title))
    console.print(f"report: {path}")
    wrong = sum(int(m.get("wrong") or 0) for m in result.metrics)
    return 0 if result.passed and not wrong else 1


def print_backends(console: Any, results: list, run_dir: str) -> None:
    """Seed 000's comparison: the same collective and size on each backend (time and busbw)."""
    from envmatrix.bench.sizes import format_size
    from envmatrix.reporting.bench_tables import headline_bw, markdown_table

    cells = {(r.backend, m["collective"], m["size_bytes"]): m for r in results for m in r.metrics}
    keys = sorted({(c, s) for _, c, s in cells})
    header = ["collective", "size"] + [f"{r.backend} {what}" for r in results for what in ("time (us)", "busbw (GB/s)")]
    rows = []
    for collective, size in keys:
        row = [collective, format_size(size)]
        for r in results:
            m = cells.get((r.backend, collective, size))
            bw = None if m is None else headline_bw(m)
            row += ["-" if m is None else f"{m['time_us']:.1f}", "-" if bw is None else f"{bw:.2f}"]
        rows.append(tuple(row))
    console.print(right_aligned_table("backends side by side", header, rows))
    path = os.path.join(run_dir, "bench_backends.md")
    with open(path, "w") as fh:
        fh.write("# Backends side by side\n\n" + markdown_table(header, rows) + "\n")
    console.print(f"report: {path}")
