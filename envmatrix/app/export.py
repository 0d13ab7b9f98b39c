"""``envmatrix export``'s lifecycle: the best trial of a search study as shell exports, a setup YAML block and a
tuner CSV."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from envmatrix import values
from envmatrix.errors import ConfigError, require


@dataclass(frozen=True)
class ExportRequest:
    out: Optional[str] = None  # a search's run directory (its study.sqlite)
    storage: Optional[str] = None  # any Optuna storage URL instead of out
    study_name: Optional[str] = None  # None: the only study in the storage
    dest: Optional[str] = None  # None: <out>/export, or ./export with a storage URL
    objective: int = 0


@dataclass(frozen=True)
class ExportResult:
    paths: list[str]  # the files written, best.sh first
    notes: list[str]  # what could not be exported, and why
    final: bool = True  # False: workers still ran trials or the confirmation, or the study stopped short before its
    # confirmation (search.max_failure_rate): the files hold the best so far


def export(request: ExportRequest) -> ExportResult:
    optuna = require("optuna", "search", "envmatrix export")

    from envmatrix.config.schema import SEARCH_DEFAULTS
    from envmatrix.search.export import stopped_short, write_exports
    from envmatrix.search.fleet import open_work
    from envmatrix.search.study import make_storage, redact

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if request.dest is not None:  # checked before the study is read: a bad --dest costs nothing and writes nothing
        if not request.dest.strip() or os.path.exists(request.dest) and not os.path.isdir(request.dest):
            raise ConfigError(f"export --dest {request.dest!r}: {'empty' if not request.dest.strip() else 'not a directory'}; "
                              "allowed: a directory (made when missing)")
        if not os.path.isdir(request.dest):
            values.output_file("--dest", request.dest)  # the folders above it
    if not request.storage and not request.out:
        raise ConfigError("export: give --out RUN_DIR (a search's run directory) or --storage URL")
    if request.storage and request.out:
        raise ConfigError(f"--storage {request.storage}: given with --out {request.out}, and each names the study's storage; "
                          "allowed: one of them (--dest DIR says where the files go)")
    if request.storage:
        url = request.storage
        # export only reads: an SQLite URL naming no file would have Optuna create an empty database there
        file = url[len("sqlite:///"):] if url.startswith("sqlite:///") else None
        if file is not None and not os.path.isfile(file):
            raise ConfigError(f"export: --storage {url}: no database file {file or '(none)'}; "
                              "allowed: the storage URL of an envmatrix search (e.g. sqlite:///reports/runs/NAME/study.sqlite)")
    else:
        path = os.path.join(os.path.abspath(request.out), "study.sqlite")
        if not os.path.isfile(path):
            raise ConfigError(f"export: --out {request.out}: no study.sqlite there; give the run directory of an envmatrix search")
        url = f"sqlite:///{path}"
    storage = make_storage(url, create=False)
    names = [s.study_name for s in optuna.study.get_all_study_summaries(storage, include_best_trial=False)]
    name = request.study_name
    if name is None:
        if len(names) != 1:
            raise ConfigError(f"export: {redact(url)} holds {len(names)} studies; pick one with --study-name ({', '.join(names) or 'none'})")
        name = names[0]
    elif name not in names:
        raise ConfigError(f"export: no study {name!r} in {redact(url)}; allowed: {', '.join(names) or 'none'}")
    study = optuna.load_study(study_name=name, storage=storage)
    dest = request.dest or (os.path.join(os.path.abspath(request.out), "export") if request.out else "export")
    pending = open_work(study, SEARCH_DEFAULTS["heartbeat_grace_s"])
    paths, notes = write_exports(study, dest, request.objective, pending)
    # a study stopped short (search.max_failure_rate) before its confirmation: its best so far is inconclusive
    return ExportResult(list(paths), list(notes), final=not pending and stopped_short(study) is None)
