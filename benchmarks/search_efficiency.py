#!/usr/bin/env python3
"""How many trials does `envmatrix search` need to reach >= 98% of the exhaustive best?

Replays seeded searches offline against a table of recorded objective values,
using envmatrix's own space, samplers and ask/tell loop (forbidden samples
skipped, repeated samples reused, exactly as `envmatrix search` does):

  # 1. sweep the search space exhaustively once (on the box), e.g. with a product strategy over search.space:
  #      envmatrix sweep conf=search_h200_exhaustive --out reports/runs/h200_exhaustive
  # 2. replay:
  python benchmarks/search_efficiency.py --store reports/runs/h200_exhaustive/results.sqlite --conf conf/search_h200.yaml \
      --samplers tpe,random --seeds 5 --out benchmarks/search_efficiency_h200.md
  # CPU demo (synthetic table from tests/data/search/fake_nccl_tests.py; no processes):
  python benchmarks/search_efficiency.py --demo --out benchmarks/search_efficiency_demo.md

"probes" counts distinct configurations measured (the device time a search costs);
"trials" also counts repeats that were answered from earlier trials.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Optional

# this script's checkout: its import path and the test data it replays (packaged data: envmatrix.paths)
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from envmatrix.search.objective import EvalOutcome, evaluate, parse_objectives  # noqa: E402
from envmatrix.search.space import SearchSpace, parse_search_space  # noqa: E402
from envmatrix.search.study import SearchSettings, make_sampler, run_search  # noqa: E402


class _Reached(Exception):
    pass


def load_search(conf: Path) -> tuple[SearchSpace, Any, list[str]]:
    import yaml

    from envmatrix.catalog import load_catalog

    data = yaml.safe_load(conf.read_text())
    grids = [str(g) for g in data.get("grids") or []]
    search = data.get("search") or {}
    space = parse_search_space(search, load_catalog(), {}, f"{conf.name}: search")
    return space, parse_objectives(search.get("objective"), "search.objective", grids), grids


def table_from_store(store: Path, space: SearchSpace, objectives: Any) -> dict[tuple, list[float]]:
    """Row (value indices) -> objective values, from the newest passed result per (setup, grid).

    ``store`` may be gzipped (the recorded box runs are committed as results.sqlite.gz).
    """
    if store.suffix == ".gz":
        import gzip
        import shutil
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            plain = Path(tmp) / store.stem
            with gzip.open(store, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)
            return table_from_store(plain, space, objectives)
    from envmatrix.store import open_store

    by_setup: dict[tuple, dict[str, list]] = {}
    with open_store(f"sqlite:///{store}") as st:
        for r in st.latest():
            if not r.passed:
                continue
            env = {a["var"]: a["value"] for a in r.setup.get("atoms", []) if a["op"] == "set"}
            row = space.row_of({v: env.get(v) for v in space.vars})
            if row is not None:
                by_setup.setdefault(row, {})[r.grid] = r.metrics
    table = {}
    for row, metrics in by_setup.items():
        try:
            table[row] = [evaluate(o, metrics) for o in objectives]
        except Exception:
            continue
    return table


def demo_table() -> tuple[SearchSpace, Any, dict[tuple, list[float]]]:
    """The fake nccl-tests busbw function over a 2x3x3x2 space (36 rows, 6 forbidden)."""
    sys.path.insert(0, str(REPO / "tests" / "data" / "search"))
    import fake_nccl_tests as fake

    from envmatrix.catalog import load_catalog

    search = {"space": {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": "all", "NCCL_MAX_NCHANNELS": [2, 4, 8],
                        "NCCL_BUFFSIZE": [1048576, 4194304]},
              "forbid": [{"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL128"}]}
    space = parse_search_space(search, load_catalog(), {}, "demo: search")
    objectives = parse_objectives({"collective": "allreduce", "size": ["16K", "1M"]}, "demo", ["1x1"])
    table = {}
    for row in space.allowed_rows():
        env = {k: v for k, v in space.params(row).items() if v is not None}
        rows = [{"collective": "allreduce", "size_bytes": s, "busbw_gbps": fake.busbw(env, s)} for s in fake.SIZES]
        table[row] = [evaluate(objectives[0], {"1x1": rows})]
    return space, objectives, table


def goal_of(table: dict, objectives: Any, target: float) -> tuple[float, float]:
    """(sign, goal): a value v reaches the target when sign * v >= goal."""
    sign = 1.0 if objectives[0].direction == "maximize" else -1.0
    best = max(sign * v[0] for v in table.values())
    return sign, (best * target if sign > 0 else best / target)


def near_best(table: dict, objectives: Any, target: float) -> int:
    sign, goal = goal_of(table, objectives, target)
    return sum(1 for v in table.values() if sign * v[0] >= goal)


def replay(space: SearchSpace, objectives: Any, table: dict, sampler: str, seed: int, target: float) -> tuple[Optional[int], Optional[int]]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sign, goal = goal_of(table, objectives, target)
    probes = 0

    def lookup(number: int, setup: Any) -> EvalOutcome:
        nonlocal probes
        probes += 1
        row = space.row_of({v: setup.assignments().get(v) for v in space.vars})
        values = table.get(row)
        return EvalOutcome(values) if values else EvalOutcome(None, "not_in_table", "no passed result in the store")

    def listener(event: str, trial: Any, outcome: Any) -> None:
        if event == "result" and not outcome.failed and sign * outcome.values[0] >= goal:
            raise _Reached(trial)

    study = optuna.create_study(directions=[o.direction for o in objectives], sampler=make_sampler(sampler, seed, len(table), space))
    settings = SearchSettings(trials=len(space.allowed_rows()) * 50, sampler=sampler, seed=seed, storage=None, study_name="replay",
                              max_failure_rate=1.0, heartbeat_interval_s=3600, heartbeat_grace_s=1e9, top_k=1, baseline=False,
                              max_forbidden_streak=10_000)
    try:
        run_search(study, space, objectives, lookup, settings, listener=listener)
    except _Reached:
        trials = sum(1 for t in study.trials if not t.user_attrs.get("forbidden"))
        return probes, trials
    return None, None


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, help="results.sqlite of an exhaustive sweep over the search space")
    ap.add_argument("--conf", type=Path, help="the search config (search.space/forbid/objective, grids)")
    ap.add_argument("--demo", action="store_true", help="synthetic table from the fake nccl-tests function (CPU, offline)")
    ap.add_argument("--samplers", default="structured,tpe,random,bruteforce")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--target", type=float, default=0.98)
    ap.add_argument("--out", type=Path, help="Markdown table to write")
    args = ap.parse_args(argv)
    if args.demo:
        space, objectives, table = demo_table()
        source = "synthetic: tests/data/search/fake_nccl_tests.py busbw, geometric mean of allreduce at 16K and 1M"
    else:
        if not (args.store and args.conf):
            ap.error("give --store and --conf, or --demo")
        space, objectives, _ = load_search(args.conf)
        table = table_from_store(args.store, space, objectives)
        source = f"store {args.store} ({len(table)} configurations with a passed result), conf {args.conf}"
        if not table:
            print(f"no passed result in {args.store} matches the space of {args.conf}", file=sys.stderr)
            return 2
    allowed = len(space.allowed_rows())
    lines = [f"# search efficiency: trials to reach >= {args.target:.0%} of the exhaustive best", "",
             f"- {source}", f"- space: {' x '.join(f'{v} ({len(space.choices(v))})' for v in space.vars)} = {space.size}, "
             f"{allowed} allowed, {len(table)} in the table; exhaustive best {objectives[0].name} = "
             f"{max(v[0] for v in table.values()):.4g}",
             f"- configurations within {args.target:.0%} of that best: {near_best(table, objectives, args.target)} of {len(table)} "
             "(how easy the space is: a uniformly random probe hits one with that probability)",
             f"- seeds 0..{args.seeds - 1}; median over seeds", "",
             "| sampler | probes per seed | median probes | median / exhaustive | trials per seed |", "|---|---|---|---|---|"]
    for sampler in args.samplers.split(","):
        res = [replay(space, objectives, table, sampler, seed, args.target) for seed in range(args.seeds)]
        probes = [p for p, _ in res if p is not None]
        med = statistics.median(probes) if len(probes) == len(res) else None
        share = f"{med / len(table):.0%}" if med is not None else "-"
        lines.append(f"| {sampler} | {', '.join(str(p) for p, _ in res)} | {med if med is not None else 'not reached'} | {share} | "
                     f"{', '.join(str(t) for _, t in res)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
