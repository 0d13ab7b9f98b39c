"""``envmatrix diff RUN_A RUN_B``: cells that flipped and busbw drops between two runs (the upgrade gate)."""

from __future__ import annotations

import argparse
import json

from envmatrix.errors import EXIT_FAILURES, EXIT_INCONCLUSIVE, EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser(
        "diff",
        help="compare two runs: cells that flipped pass<->fail and busbw drops; exit 1 on any regression",
        description="Compare run B against run A cell by cell (setup, grid): pass->fail and fail->pass with the error line, "
        "and busbw regressions beyond --busbw-drop per (setup, grid, collective, size). Exit 1 on any pass->fail or busbw "
        "regression, 3 when a cell or busbw point of run A is not in run B (nothing compared there), 0 otherwise: a gate "
        "for NCCL, plugin or driver upgrades.",
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
    from envmatrix.app.diff import diff_run_dirs
    from envmatrix.reporting.diff import diff_text

    result = diff_run_dirs(args.run_a, args.run_b, args.busbw_drop)
    print(json.dumps(result.to_json(), indent=1) if args.json else diff_text(result, args.run_a, args.run_b))
    if result.regressed:
        return EXIT_FAILURES
    return EXIT_INCONCLUSIVE if result.inconclusive else EXIT_OK
