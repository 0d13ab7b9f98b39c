"""``envmatrix report RUN_DIR``: one self-contained HTML report of a run directory."""

from __future__ import annotations

import argparse

from envmatrix.errors import EXIT_OK, ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "report",
        help="write one self-contained HTML report (matrix heatmap, busbw curves, bisect trail, search plots) of a run directory",
        description="Render everything a run directory holds (sweep/bench results, bisect reports, a search study) into one "
        "HTML file with inline SVG plots: no network is needed to view it.",
        epilog="examples:\n  envmatrix report reports/runs/aws_ofi\n  envmatrix report reports/runs/bench -o /tmp/bench.html"
        "\n  envmatrix report reports/runs/bench --table conditions --format csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("run_dir", metavar="RUN_DIR", help="the --out directory of a sweep, bench, bisect or search")
    r.add_argument("-o", "--output", metavar="PATH", help="where to write (default: RUN_DIR/report.html)")
    r.add_argument("--title", help="page title (default: the run directory's name)")
    r.add_argument("--table", choices=("conditions",), help="print a table instead of writing HTML: conditions = seed "
                   "000's and 001's tables (rows: network conditions; one block per pattern p2p, allreduce, ps_central, "
                   "ps_sharded; time per sync with the floor S/R and the physics check's flags)")
    r.add_argument("--format", choices=("markdown", "csv"), default=None,
                   help="with --table: markdown (default) or csv (one line per cell, min/max kept)")
    r.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from envmatrix.app.report import load_results, write_html_report

    if args.table == "conditions":
        from envmatrix.reporting.conditions_tables import conditions_csv, conditions_markdown

        if args.output is not None:  # the table is printed: -o was dropped without a word
            raise ConfigError(f"-o/--output {args.output}: not with --table, which prints the table; allowed: --table "
                              "conditions > FILE, or -o PATH without --table (the HTML report)")
        results = load_results(args.run_dir)
        print(conditions_csv(results) if args.format == "csv" else conditions_markdown(results, args.title or
                                                                                        "Network conditions"), end="")
        return EXIT_OK
    if args.format is not None:  # --format markdown alone was the default, so it passed and changed nothing
        raise ConfigError(f"--format {args.format}: only with --table; allowed: --table conditions --format "
                          f"{args.format}")

    print(f"html report: {write_html_report(args.run_dir, args.output, args.title)}")
    return EXIT_OK
