#!/usr/bin/env python3
"""Cheap fidelity first (search.screen, issue 37) on the scale landscapes: what it buys within a cost budget.

Each search runs envmatrix's own ask/tell loop (``run_search``) with the default sampler on a landscape of
``search_scale.py`` (same families, seeds, +-3% noise). A trial with a screen is first read at the cheap fidelity:
the landscape's 16M model of ``search_scale.cheap_tables`` (the full value x (1 - a latency share drawn from the
recorded H200 1x4 store), one noise draw per row), then at the full one if its cheap value is at least ``keep`` of
the best cheap value so far, the default env's included. The study stops once the budget is spent, as
search.budget_s stops a real one (the plan never reads the budget, so cutting one long run at the budget is the run
that budget would give). Costs (``--cost-model``): ``uniform``, a full probe 1 and a cheap one ``--cheap-cost``
(budget in full probes); ``gpu``, the probe walls fitted on the recorded H100 runs (below: slow configs cost more at
the full bench, and one past the probe timeout fails there; budget in seconds). The export is what `envmatrix
search` exports: the top 3 full-fidelity trials and the default env re-measured in 3 interleaved rounds; score =
true(exported) / max(true). The unscreened arm runs under the same budget (uniform 150: search_scale.py's figure).

    nice -n 10 python benchmarks/search_screen.py --families scale8 --first-seed 2000 --seeds 40 --keep 0.7,0.8
    nice -n 10 python benchmarks/search_screen.py --cost-model gpu --budget 750 --families scale8 --first-seed 2000 --seeds 40
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from search_scale import NOISE, cheap_tables, exported_row, family_table, recorded_latency_shares  # noqa: E402
from search_landscapes import default_row  # noqa: E402

from envmatrix.search.objective import EvalOutcome, parse_objectives  # noqa: E402
from envmatrix.search.screen import SCREENED, CostCheck, Screen  # noqa: E402
from envmatrix.search.study import BASELINE_ATTR, SearchSettings, make_sampler, run_search  # noqa: E402


# --cost-model gpu: probe walls fitted on the two recorded H100 runs of gpu_search_screen.yaml (159 probes,
# benchmarks/results/gpu_search_screen_*), busbw in GB/s: a full probe (16M + 1G, 10 iterations) 1.64 + 20.54 / busbw(1G)
# s, a cheap one (16M) 1.59 + 0.25 / busbw(16M) s, a full probe past the 120 s probe timeout fails there (as two did);
# a landscape value v is busbw 8.7 v (8.7 GB/s: the best measured). --cost-model uniform: 1 a full probe, --cheap-cost
# a cheap one.
PEAK_GBPS, TIMEOUT_S = 8.7, 120.0


def probe_cost(model: str, cheap_cost: float, value: Optional[float], cheap: bool) -> float:
    if model == "uniform":
        return cheap_cost if cheap else 1.0
    if value is None:  # refused at init: the launch only
        return 1.59 if cheap else 1.64
    gbps = PEAK_GBPS * value
    return 1.59 + 0.25 / gbps if cheap else min(TIMEOUT_S, 1.64 + 20.54 / gbps)


def budget_run(family: str, seed: int, shares: list[float], keep: Optional[float], model: str, cheap_cost: float,
               budget: float) -> dict[str, Any]:
    """One search under a cost budget; ``keep`` None: no screen."""
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space, table = family_table(family, seed)
    small, _, _ = cheap_tables(family, seed, shares)
    noise = random.Random(seed * 7919 + 1)
    spent = [0.0]

    def row_of(setup: Any) -> tuple:
        return space.row_of({v: setup.assignments().get(v) for v in space.vars})

    def full(number: int, setup: Any) -> EvalOutcome:
        row = row_of(setup)
        cost = probe_cost(model, cheap_cost, table[row], cheap=False)
        spent[0] += cost
        if table[row] is None:
            return EvalOutcome(None, "nccl_refused", "NCCL WARN refused the config")
        if cost >= TIMEOUT_S:
            return EvalOutcome(None, "timeout", "the full bench ran past the probe's timeout")
        return EvalOutcome([table[row] * (1 + noise.uniform(-NOISE, NOISE))])

    def cheap(number: int, setup: Any) -> EvalOutcome:
        row = row_of(setup)
        spent[0] += probe_cost(model, cheap_cost, None if table[row] is None else small[row], cheap=True)
        if table[row] is None:
            return EvalOutcome(None, "nccl_refused", "NCCL WARN refused the config")
        return EvalOutcome([small[row]], attrs={"fidelity": "16M"})

    base = default_row(space, table)
    study = optuna.create_study(directions=["maximize"], sampler=make_sampler("structured", seed, len(table), space))
    screen = None
    if keep is not None:
        full.cheap = cheap  # type: ignore[attr-defined]
        screen = Screen(None, None, keep, 1.0)
        study.set_user_attr(BASELINE_ATTR, {"values": [table[base]], "failed": False, "screen": CostCheck(
            probe_cost(model, cheap_cost, small[base], True), probe_cost(model, cheap_cost, table[base], False), 1.0,
            small[base], table[base]).to_json()})
    settings = SearchSettings(trials=100_000, sampler="structured", seed=seed, storage=None, study_name="bench",
                              max_failure_rate=1.0, heartbeat_interval_s=3600, heartbeat_grace_s=1e9, top_k=3,
                              baseline=keep is not None, max_forbidden_streak=10_000, screen=screen)

    class Spent(Exception):
        pass

    def stop_when_spent(event: str, trial: Any, outcome: Any) -> None:
        if event == "result" and spent[0] >= budget:
            raise Spent

    try:
        run_search(study, space, parse_objectives(None, "bench", ["1x1"]), full, settings, listener=stop_when_spent)
    except Spent:
        pass
    trials = [t for t in study.get_trials() if t.state != TrialState.RUNNING]
    seen: dict[tuple, float] = {}
    for t in trials:
        if t.state == TrialState.COMPLETE:
            row = space.row_of(t.params)
            seen[row] = max(t.values[0], seen.get(row, -math.inf))
    row, _ = exported_row(space, table, seen, lambda r: table[r] * (1 + noise.uniform(-NOISE, NOISE)))
    best = max(v for v in table.values() if v is not None)
    return {"score": table[row] / best, "vs_default": table[row] / table[base], "trials": len(trials),
            "screened": sum(bool(t.user_attrs.get(SCREENED)) for t in trials),
            "timeouts": sum(t.user_attrs.get("failure_class") == "timeout" for t in trials),
            "exported_fails": table[row] is None}


def line(family: str, seeds: range, what: str, runs: list[dict]) -> str:
    scores = [r["score"] for r in runs]
    return (f"| {family} | {seeds.start}-{seeds.stop - 1} | {what} | {statistics.median(scores):.3f} | "
            f"{sum(s >= 0.95 for s in scores)}/{len(scores)} | {min(scores):.3f} | {statistics.median(r['trials'] for r in runs):.0f} | "
            f"{statistics.median(r['screened'] for r in runs):.0f} | {statistics.median(r['timeouts'] for r in runs):.0f} | "
            f"{min(r['vs_default'] for r in runs):.2f} | "
            f"{sum(r['exported_fails'] for r in runs)} |")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default="scale8")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--budget", type=float, default=150.0, help="in full probes (uniform) or seconds (gpu)")
    ap.add_argument("--cost-model", choices=("uniform", "gpu"), default="uniform")
    ap.add_argument("--keep", default="0.8")
    ap.add_argument("--cheap-cost", type=float, default=0.25, help="uniform: a cheap probe's cost in full probes")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unscreened runs")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    shares = recorded_latency_shares()
    unit = "full probes" if args.cost_model == "uniform" else "s"
    lines = ["| family | seeds | search | median exported/optimum | seeds >= 0.95 | worst | trials (median) | "
             "screened (median) | timeouts (median) | worst exported/default | exported a failing env |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for family in args.families.split(","):
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        arms: list[Optional[float]] = ([] if args.no_baseline else [None]) + [float(k) for k in args.keep.split(",")]
        for keep in arms:
            runs = [budget_run(family, seed, shares, keep, args.cost_model, args.cheap_cost, args.budget) for seed in seeds]
            what = "no screen" if keep is None else f"screen keep {keep:g}"
            cost = f"cheap probe {args.cheap_cost:g} of a full one" if args.cost_model == "uniform" else "probe walls of the H100 record"
            lines.append(line(family, seeds, f"{what}, {cost}, budget {args.budget:g} {unit}", runs))
            print(lines[-1], "scores:", " ".join(f"{r['score']:.3f}" for r in runs), flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
