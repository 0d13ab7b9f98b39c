"""``envmatrix bench``: one setup on one grid, turned into a one-run sweep input."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from envmatrix.config.resolve import SweepInput, check_pins
from envmatrix.env.atoms import Setup, atoms_from_mapping
from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.planning.grid import auto_grids, check_fits, parse_grid
from envmatrix.probes import get_probe


def parse_env_flags(items: list[str]) -> dict[str, str]:
    env = {}
    for item in items:
        if "=" not in item or not item.split("=", 1)[0]:
            raise ConfigError(f"--env {item!r}: not KEY=VALUE; allowed: e.g. --env NCCL_ALGO=Ring")
        key, value = item.split("=", 1)
        env[key] = value
    return env


def prepare_bench(inp: SweepInput, args: Any, gpus: int) -> SweepInput:
    from envmatrix.catalog import load_catalog
    from envmatrix.env.merge import caller_pins

    if args.setup is not None:
        named = {s.name: s for s in inp.setups}
        if args.setup not in named:
            raise ConfigError(f"--setup {args.setup!r}: not in {inp.conf_file.name}{did_you_mean(args.setup, named)}; allowed: {', '.join(named)}")
        base = named[args.setup]
    else:
        base = Setup("env")
    extra = atoms_from_mapping(parse_env_flags(args.env), "--env")
    atoms = tuple(a for a in base.atoms if a.var not in {e.var for e in extra}) + extra
    setup = Setup(base.name if not extra else f"{base.name}+env", atoms)
    load_catalog().validate_setup(setup, where="bench", allow_unknown=args.allow_unknown_vars)
    check_pins([setup], caller_pins(), "bench")
    grid = parse_grid(args.grid, "--grid") if args.grid else (inp.grids[0] if inp.grids else auto_grids(gpus)[0])
    check_fits([grid], inp.backend, gpus, 64)
    bench = {
        "collectives": [c.strip() for c in args.collectives.split(",") if c.strip()],
        "min_bytes": args.min_bytes,
        "max_bytes": args.max_bytes,
        "factor": args.factor,
        "step_bytes": args.step_bytes,
        "iters": args.iters,
        "warmup": args.warmup,
        "dtype": args.dtype,
        "check": not args.no_check,
        "timing": args.timing,
    }
    probe = get_probe("builtin").spec({"bench": bench, "timeout_s": args.timeout, "collectives": ["allreduce"]}, "bench", inp.backend)
    return dataclasses.replace(inp, name="bench", grids=(grid,), setups=(setup,), probe=probe)


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
