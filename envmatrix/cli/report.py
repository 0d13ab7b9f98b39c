"""``envmatrix report RUN_DIR``: one self-contained HTML report of a run directory."""

from __future__ import annotations

import argparse

from envmatrix.errors import EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "report",
        help="write one self-contained HTML report (matrix heatmap, busbw curves, bisect trail, search plots) of a run directory",
        description="Render everything a run directory holds (sweep/bench results, bisect reports, a search study) into one "
        "HTML file with inline SVG plots: no network is needed to view it.",
        epilog="examples:\n  envmatrix report reports/runs/aws_ofi\n  envmatrix report reports/runs/bench -o /tmp/bench.html",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("run_dir", metavar="RUN_DIR", help="the --out directory of a sweep, bench, bisect or search")
    r.add_argument("-o", "--output", metavar="PATH", help="where to write (default: RUN_DIR/report.html)")
    r.add_argument("--title", help="page title (default: the run directory's name)")
    r.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from envmatrix.app.report import write_html_report

    print(f"html report: {write_html_report(args.run_dir, args.output, args.title)}")
    return EXIT_OK
