"""``envmatrix diff RUN_A RUN_B``: cells that flipped and busbw drops between two runs (the upgrade gate)."""

from __future__ import annotations

import argparse
import json
import os

from envmatrix.errors import EXIT_FAILURES, EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser(
        "diff",
        help="compare two runs: cells that flipped pass<->fail and busbw drops; exit 1 on any regression",
        description="Compare run B against run A cell by cell (setup, grid): pass->fail and fail->pass with the error line, "
        "and busbw regressions beyond --busbw-drop per (setup, grid, collective, size). Exit 1 on any pass->fail or busbw "
        "regression, 0 otherwise: a gate for NCCL, plugin or driver upgrades.",
        epilog="examples:\n  envmatrix diff reports/runs/before reports/runs/after\n"
        "  envmatrix diff before/ after/ --busbw-drop 10% --json > diff.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("run_a", metavar="RUN_A", help="the reference run directory (or its results.sqlite)")
    d.add_argument("run_b", metavar="RUN_B", help="the run to check against it")
    d.add_argument("--busbw-drop", default="5%", metavar="PCT", help="busbw drop that counts as a regression (default 5%%)")
    d.add_argument("--json", action="store_true", help="print the comparison as JSON instead of text")
    d.set_defaults(func=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    from envmatrix.reporting.diff import diff_runs, parse_threshold
    from envmatrix.reporting.html_model import load_results

    threshold = parse_threshold(args.busbw_drop)
    runs = []
    for path in (args.run_a, args.run_b):
        results = [r for r in load_results(path, "diff") if not str(r.sweep_id or "").startswith(("bisect-", "search-"))]
        if not results:
            from envmatrix.errors import ConfigError

            raise ConfigError(f"diff: {path}: no sweep or bench results there (results.sqlite or results.json)")
        runs.append(results)
    result = diff_runs(runs[0], runs[1], threshold)
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        _print_text(result, args.run_a, args.run_b)
    return EXIT_FAILURES if result.regressed else EXIT_OK


def _print_text(d, run_a: str, run_b: str) -> None:
    print(f"diff {os.path.basename(os.path.abspath(run_a))} -> {os.path.basename(os.path.abspath(run_b))}: "
          f"{len(d.broke)} pass->fail, {len(d.fixed)} fail->pass, {len(d.slower)} busbw drops > {d.threshold_pct:g}% "
          f"({d.compared_points} (collective, size) points compared)")
    for f in d.broke:
        print(f"  REGRESSION ({f.setup}) {f.grid} [{f.backend}]: pass -> {f.after}: {f.line}")
    for c in d.slower:
        print(f"  REGRESSION ({c.setup}) {c.grid} [{c.backend}] {c.collective} {c.size_bytes} B: busbw "
              f"{c.before_gbps:.3g} -> {c.after_gbps:.3g} GB/s ({c.change_pct:+.1f}%)")
    for f in d.fixed:
        print(f"  fixed ({f.setup}) {f.grid} [{f.backend}]: {f.before} -> pass (was: {f.line})")
    for f in d.changed_failure:
        print(f"  still failing ({f.setup}) {f.grid} [{f.backend}]: {f.before} -> {f.after}: {f.line}")
    for label, keys in (("only in A", d.only_a), ("only in B", d.only_b)):
        if keys:
            print(f"  {label}: " + ", ".join(f"({s}) {g} [{b}]" for s, g, b in keys))
    print("verdict: " + ("REGRESSED" if d.regressed else "no regression"))
