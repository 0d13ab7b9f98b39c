"""``envmatrix export``: the best trial of a search study as shell exports, a setup YAML block and a tuner CSV."""

from __future__ import annotations

import argparse
import os

from envmatrix.errors import ConfigError, require


def add_parser(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser(
        "export",
        help="write the best trial of a search as shell exports, a setup YAML block and an NCCL tuner CSV",
        description="Read a study made by envmatrix search and write best.sh, best_setup.yaml and, when the space covered "
        "NCCL_ALGO/NCCL_PROTO/channels, tuner.csv (NVIDIA example tuner plugin format).",
        epilog="examples:\n  envmatrix export --out reports/runs/search_demo\n"
        "  envmatrix export --storage postgresql://user@db/envmatrix --study-name h200 --dest ./h200_best",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument("--out", metavar="DIR", help="the search's run directory (its study.sqlite)")
    e.add_argument("--storage", metavar="URL", help="any Optuna storage URL instead of --out")
    e.add_argument("--study-name", help="study to read (default: the only study in the storage)")
    e.add_argument("--dest", metavar="DIR", help="where to write (default: <run dir>/export, or ./export with --storage)")
    e.add_argument("--objective", type=int, default=0, help="objective index that picks the best trial (multi-objective)")
    e.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    optuna = require("optuna", "search", "envmatrix export")

    from envmatrix.search.export import write_exports
    from envmatrix.search.study import _redact, make_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if not args.storage and not args.out:
        raise ConfigError("export: give --out RUN_DIR (a search's run directory) or --storage URL")
    if args.storage:
        url = args.storage
    else:
        path = os.path.join(os.path.abspath(args.out), "study.sqlite")
        if not os.path.isfile(path):
            raise ConfigError(f"export: --out {args.out}: no study.sqlite there; give the run directory of an envmatrix search")
        url = f"sqlite:///{path}"
    storage = make_storage(url)
    names = [s.study_name for s in optuna.study.get_all_study_summaries(storage, include_best_trial=False)]
    name = args.study_name
    if name is None:
        if len(names) != 1:
            raise ConfigError(f"export: {_redact(url)} holds {len(names)} studies; pick one with --study-name ({', '.join(names) or 'none'})")
        name = names[0]
    elif name not in names:
        raise ConfigError(f"export: no study {name!r} in {_redact(url)}; allowed: {', '.join(names) or 'none'}")
    study = optuna.load_study(study_name=name, storage=storage)
    dest = args.dest or (os.path.join(os.path.abspath(args.out), "export") if args.out else "export")
    paths, notes = write_exports(study, dest, args.objective)
    for note in notes:
        print(note)
    for path in paths:
        print(f"wrote {path}")
    with open(paths[0]) as fh:
        print(fh.read(), end="")
    return 0
