"""``envmatrix export``: the best trial as shell ``export`` lines, a setup block for a
conf/ YAML, and an NCCL tuner-plugin CSV.

The CSV follows NVIDIA's example tuner plugin (``ext-tuner/example``, read via
``NCCL_TUNER_CONFIG_FILE``)::

    collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff

For each grid, collective and measured size, the row names the algorithm,
protocol and channel count of the completed trial with the highest busbw at
that size; a row covers (previous measured size, this size], consecutive
sizes with the same choice are merged, and sizes above the largest measured
one are left to NCCL. Rows are written only for trials that pinned one
algorithm and one protocol, and only when the space varied NCCL_ALGO,
NCCL_PROTO or a channel count.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from envmatrix import values
from envmatrix.bench.formulas import ALL
from envmatrix.env.atoms import PATH_OPS, SET, UNSET, Setup
from envmatrix.errors import ConfigError
from envmatrix.search.objective import Objective
from envmatrix.search.space import SearchSpace
from envmatrix.search.study import BASELINE_ATTR, STOPPED_ATTR, STUDY_ATTR

TUNER_HEADER = "collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff"
TUNER_COLLECTIVES = {name: spec.tuner_name for name, spec in ALL.items() if spec.tuner_name}
TUNER_ALGOS = {"ring": "ring", "tree": "tree", "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain",
               "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat"}
TUNER_PROTOS = {"ll": "ll", "ll128": "ll128", "simple": "simple"}
EXPORT_FILES = ("best.sh", "best_setup.yaml", "tuner.csv")  # what write_exports may write into its dest
TUNER_VARS = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS")


def study_meta(study: Any) -> tuple[SearchSpace, tuple[Objective, ...], dict[str, Any]]:
    meta = study.user_attrs.get(STUDY_ATTR)
    if not meta:
        raise ConfigError(f"export: study {study.study_name!r} was not made by envmatrix search (no {STUDY_ATTR!r} attribute)")
    return SearchSpace.from_json(meta["space"]), tuple(Objective.from_json(o) for o in meta["objectives"]), meta


def completed(study: Any) -> list[Any]:
    from optuna.trial import TrialState

    return list(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def ranked(study: Any, objectives: Sequence[Objective], index: int = 0) -> list[Any]:
    """Completed trials, best first by objective ``index``; duplicates (cached) dropped."""
    sign = -1.0 if objectives[index].direction == "maximize" else 1.0
    trials = [t for t in completed(study) if t.user_attrs.get("cached_from") is None]
    return sorted(trials, key=lambda t: (sign * t.values[index], t.number))


def best_trial(study: Any, objectives: Sequence[Objective], index: int = 0) -> Any:
    order = ranked(study, objectives, index)
    if not order:
        from optuna.trial import TrialState

        from envmatrix.errors import EXIT_FAILURES, EXIT_INCONCLUSIVE, NoAnswer

        # not bad input (exit 2): the study is the user's, its trials failed (1) or none has finished (3)
        failed = len(study.get_trials(deepcopy=False, states=(TrialState.FAIL,)))
        from envmatrix.search.study import screened_count

        screened = screened_count(study)
        why = (f" ({failed} failed: search.md lists why)" if failed else
               f" (all {screened} stopped at search.screen's cheap fidelity; a lower search.screen.keep measures more "
               "in full)" if screened else "; run envmatrix search first")
        raise NoAnswer(f"export: study {study.study_name!r} has no completed trial yet" + why,
                       EXIT_FAILURES if failed else EXIT_INCONCLUSIVE)
    return order[0]


def gain_over(v: Any, b: Any, direction: str) -> str:
    """``v`` against the default env's ``b`` as a factor where higher is better (1.000x: as good)."""
    if not v or not b:
        return "-"
    r = v / b if direction == "maximize" else b / v
    return f"{r:.3f}x"


def stopped_short(study: Any) -> Optional[str]:
    """Why the study's trials stopped before its confirmation (search.max_failure_rate), while no confirmation has
    been written since; None otherwise. Its best is one measurement of a study cut short: inconclusive (exit 3)."""
    from envmatrix.search.confirm import CONFIRM_ATTR

    stopped = study.user_attrs.get(STOPPED_ATTR)
    return None if not stopped or study.user_attrs.get(CONFIRM_ATTR) else str(stopped)


def shell_exports(setup: Setup, comment: str = "") -> str:
    lines = [f"# {c}" for c in comment.splitlines()] + setup.shell_lines()
    return "\n".join(lines) + "\n"


def setup_mapping(setup: Setup) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for atom in setup.atoms:
        if atom.op == SET:
            out[atom.var] = atom.value
        elif atom.op == UNSET:
            out[atom.var] = None
        elif atom.op in PATH_OPS:
            entry = out.setdefault(atom.var, {})
            entry.setdefault(atom.op, []).append(atom.value)
    return out


def setup_yaml(setup: Setup, name: str, comment: str = "") -> str:
    import yaml

    body = yaml.safe_dump({"setups": {name: setup_mapping(setup)}}, sort_keys=False, default_flow_style=False)
    return "".join(f"# {c}\n" for c in comment.splitlines()) + body


def _single(value: Optional[str], table: dict[str, str], function: str) -> Optional[str]:
    """The one algorithm/protocol ``value`` forces on NCCL ``function``, or None (several, excluded or unset).

    Understands NCCL 2.24+'s per-function form ``allreduce:tree;allgather:ring``: an entry
    without ``func:`` applies to every function, a named one overrides it for that function.
    """
    chosen = None
    for entry in (value or "").split(";"):
        func, sep, items = entry.strip().rpartition(":")
        if not sep:
            chosen = items if chosen is None else chosen
        elif func.strip().lower() == function:
            chosen = items
            break
    if not chosen or "," in chosen or chosen.strip().startswith("^"):
        return None
    return table.get(chosen.strip().lower())


def _channels(env: dict[str, str]) -> str:
    for var in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS", "NCCL_MIN_NCHANNELS", "NCCL_MIN_CTAS"):
        if env.get(var):
            return str(int(env[var]))
    return "-1"


def tuner_rows(study: Any) -> list[list[str]]:
    space, objectives, meta = study_meta(study)
    if not set(space.vars) & set(TUNER_VARS):
        return []
    trials = [t for t in completed(study) if t.user_attrs.get("cached_from") is None and t.user_attrs.get("metrics")]
    rows: list[list[str]] = []
    for grid in meta.get("grids", []):
        nodes, ppn = (int(x) for x in grid.split("x"))
        colls = sorted({c for t in trials for c in (t.user_attrs["metrics"].get(grid) or {})})
        for coll in colls:
            if coll not in TUNER_COLLECTIVES:
                continue
            sizes = sorted({int(s) for t in trials for s in (t.user_attrs["metrics"].get(grid) or {}).get(coll, {})})
            choices: list[tuple[int, Optional[tuple[str, str, str]]]] = []
            for size in sizes:
                scored = [(t.user_attrs["metrics"][grid][coll][str(size)], -t.number, t)
                          for t in trials if str(size) in (t.user_attrs["metrics"].get(grid) or {}).get(coll, {})]
                _, _, top = max(scored, key=lambda x: (x[0], x[1]))
                env = space.setup_of_params(top.params).assignments()
                function = TUNER_COLLECTIVES[coll]
                algo = _single(env.get("NCCL_ALGO"), TUNER_ALGOS, function)
                proto = _single(env.get("NCCL_PROTO"), TUNER_PROTOS, function)
                choices.append((size, (algo, proto, _channels(env)) if algo and proto else None))
            low = 0
            for i, (size, choice) in enumerate(choices):
                nxt = choices[i + 1][1] if i + 1 < len(choices) else object()
                if choice is not None and nxt == choice:
                    continue  # merge with the next size
                if choice is not None:
                    rows.append([TUNER_COLLECTIVES[coll], str(low), str(size), *choice, str(nodes), str(nodes * ppn), "-1", "-1"])
                low = size + 1
    return rows


def tuner_csv(study: Any) -> Optional[str]:
    from envmatrix.catalog.backends import is_meaningful_study

    meta = study_meta(study)[2]
    if not is_meaningful_study(meta.get("backend"), (meta.get("probe") or {}).get("name")):
        return None  # gloo never ran NCCL's algorithms: a tuner file would encode noise
    rows = tuner_rows(study)
    if not rows:
        return None
    head = [
        f"# NCCL tuner plugin config from envmatrix search study {study.study_name}",
        "# Format: " + TUNER_HEADER,
        "# One row per (grid, collective, size range): the fastest completed trial's algorithm/protocol/channels at",
        "# each measured size; sizes above the largest measured one are left to NCCL. Use: NCCL_TUNER_CONFIG_FILE=<this file>",
    ]
    shared = sorted({g for t in completed(study) for g in t.user_attrs.get("shared_gpu") or []})
    if shared:  # only there when the study was told search.allow_shared_gpu_figures: the file says what it rests on
        head.append(f"# NOT REPRESENTATIVE: on {', '.join(shared)} the ranks shared GPUs as emulated hosts "
                    "(search.allow_shared_gpu_figures); these choices rest on one GPU's split bandwidth")
    return "\n".join(head + [",".join(r) for r in rows]) + "\n"


def export_decision(study: Any, index: int = 0) -> tuple[Optional[Any], str, list[str]]:
    """(trial to export or None for "keep the default", its comment, notes for the user).

    A confirmed winner (``envmatrix search`` re-measures the top trials, see
    envmatrix.search.confirm) overrides the single-measurement ranking for objective 0.
    """
    from envmatrix.search.confirm import CONFIRM_ATTR, DEFAULT

    space, objectives, meta = study_meta(study)
    conf = study.user_attrs.get(CONFIRM_ATTR) if index == 0 else None
    if conf is None:
        best = best_trial(study, objectives, index)
        value = ", ".join(f"{o.name}={v:.4g}" for o, v in zip(objectives, best.values))
        note = "not confirmed: one measurement per trial (search.confirm_top_k=0 or an older study)" if index == 0 else \
            f"best by objective {index}, one measurement per trial"
        stopped = stopped_short(study)
        if stopped is None:
            return best, f"trial {best.number} ({value})", [note]
        base = (study.user_attrs.get(BASELINE_ATTR) or {}).get("values") or [None] * len(objectives)
        versus = gain_over(best.values[index], base[index], objectives[index].direction)
        name = objectives[index].name
        against = "" if versus == "-" else f"; its one measurement is {versus} the default env's {name}"
        return best, f"trial {best.number} ({value}), NOT CONFIRMED (the search stopped before its confirmation)", \
            [f"not confirmed: the search stopped before its confirmation ({stopped}){against}; this is the best so far "
             "of a study cut short: run the search again (it resumes the study: its remaining trials, then the "
             "confirmation) and export again"]
    ranking = {r["label"]: r for r in conf["ranking"]}
    if conf["keep_default"]:
        med = ranking.get(DEFAULT, {}).get("median")
        # the reason already says "keep the default: ..." (search.confirm.decide)
        return None, "", [f"{conf['reason']} (default env median {med:.4g})" if med is not None else conf["reason"]]
    best = next(t for t in study.get_trials(deepcopy=False) if t.number == conf["winner"])
    row = ranking[conf["winner"]]
    comment = (f"trial {best.number}, confirmed: median {objectives[0].name}={row['median']:.4g} "
               f"[{row['low']:.4g} .. {row['high']:.4g}] over {len(row['values'])} interleaved repeats")
    return best, comment, [conf["reason"]]


def tuner_decision(study: Any, best: Optional[Any]) -> tuple[Optional[str], str]:
    """(CSV text or None, why): written whenever the exported winner pins an algorithm or a protocol."""
    if best is None:
        return None, "tuner.csv not written: the default env is kept, so NCCL's own tuning stays"
    space, _, _ = study_meta(study)
    env = space.setup_of_params(best.params).assignments()
    pinned = [v for v in ("NCCL_ALGO", "NCCL_PROTO") if env.get(v)]
    if not pinned:
        return None, "tuner.csv not written: the winner sets neither NCCL_ALGO nor NCCL_PROTO (NCCL's own choice won)"
    text = tuner_csv(study)
    if text is None:
        return None, (f"tuner.csv not written: the winner sets {', '.join(pinned)} but no trial pinned one algorithm and "
                      "one protocol for a collective the tuner plugin knows")
    return text, f"tuner.csv written: the winner sets {', '.join(pinned)}"


def write_exports(study: Any, dest: str, index: int = 0, open_work: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Write best.sh, best_setup.yaml and (when it applies) tuner.csv into ``dest``; returns (paths, notes).

    "Keep the default" writes a best.sh that exports nothing and says why, and no setup or CSV. ``open_work``
    (search.fleet.open_work): what the study's workers still do; the files then hold the best so far, and say so.
    """
    import os

    space, objectives, meta = study_meta(study)
    index = values.index("--objective", index, objectives, "objective")
    best, what, notes = export_decision(study, index)
    if open_work:
        notes = [f"not final, the study is still under way ({'; '.join(open_work)}): this is the best so far; "
                 "export again once its workers are done"] + [n for n in notes if not n.startswith("not confirmed")]
        what = f"{what}, NOT FINAL (the study was still under way)"
    head = f"envmatrix search: study {study.study_name}"
    grids = ", ".join(meta.get("grids", []))
    os.makedirs(dest, exist_ok=True)
    files: list[tuple[str, Optional[str]]]
    if best is None:
        files = [("best.sh", shell_exports(Setup("default", (), origin="baseline"), f"{head} on {grids}\n{notes[0]}"))]
        notes.append(tuner_decision(study, None)[1])
    else:
        setup = space.setup_of_params(best.params)
        comment = f"{head}, {what} on {grids}"
        name = f"best_{study.study_name}".replace(" ", "_")
        csv, why = tuner_decision(study, best)
        notes.append(why)
        files = [("best.sh", shell_exports(setup, comment)), ("best_setup.yaml", setup_yaml(setup, name, comment)),
                 ("tuner.csv", csv)]
    paths = []
    for fname, text in files:
        if text is None:
            continue
        path = os.path.join(dest, fname)
        with open(path, "w") as fh:
            fh.write(text)
        paths.append(path)
    # an earlier export's setup or tuner file left beside this best.sh would be read as this export's (a tuner.csv
    # from a NOT FINAL export beside a final "keep the default")
    for fname in EXPORT_FILES:
        path = os.path.join(dest, fname)
        if path in paths or not os.path.isfile(path):
            continue
        with open(path, errors="replace") as fh:
            ours = "envmatrix search" in fh.readline()
        if ours:
            os.remove(path)
            notes.append(f"removed {path}: an earlier export's, not this one's")
        else:
            notes.append(f"left {path} as it was: not written by envmatrix export, and not this export's")
    return paths, notes
