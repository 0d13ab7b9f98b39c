"""``envmatrix export``: the best trial of a search study as shell exports, a setup YAML block and a tuner CSV."""

from __future__ import annotations

import argparse

from envmatrix.cli.common import add_command, request_from
from envmatrix.errors import EXIT_INCONCLUSIVE

EXAMPLES = """examples:
  envmatrix export --out reports/runs/search_demo
  envmatrix export --storage postgresql://user@db/envmatrix --study-name h200 --dest ./h200_best"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    e = add_command(sub, "export", "write the best trial of a search as shell exports, a setup YAML block and an NCCL tuner CSV",
                    "Read a study made by envmatrix search and write best.sh, best_setup.yaml and, when the space covered "
                    "NCCL_ALGO/NCCL_PROTO/channels, tuner.csv (NVIDIA example tuner plugin format).", EXAMPLES)
    e.add_argument("--out", metavar="DIR", help="the search's run directory (its study.sqlite)")
    e.add_argument("--storage", metavar="URL", help="any Optuna storage URL instead of --out")
    e.add_argument("--study-name", help="study to read (default: the only study in the storage)")
    e.add_argument("--dest", metavar="DIR", help="where to write (default: <run dir>/export, or ./export with --storage)")
    e.add_argument("--objective", type=int, default=0, help="objective index that picks the best trial (multi-objective)")
    e.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from envmatrix.app.export import ExportRequest, export

    done = export(request_from(ExportRequest, args))
    for note in done.notes:
        print(note)
    for path in done.paths:
        print(f"wrote {path}")
    with open(done.paths[0]) as fh:
        print(fh.read(), end="")
    return 0 if done.final else EXIT_INCONCLUSIVE
