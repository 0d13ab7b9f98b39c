#!/usr/bin/env python3
"""Landscape benchmark for `envmatrix search`: exported best / true optimum at 10/20/40% of the space.

Every search runs through envmatrix's own space, samplers and ask/tell loop
(``run_search``) against an in-process objective: a noise-free landscape
(``true``) measured with +-3% uniform multiplicative noise. At each budget the
export is what `envmatrix search` exports: the top 3 trials and the default
env re-measured in 3 interleaved rounds (envmatrix.search.confirm; those 12
measurements are not counted in the budget), the confirmed winner, or the
default when nothing beats it. Score = true(exported) / max(true).

Families (each seed draws a new landscape of that family):
  separable   per-variable unimodal factors in log position, no interaction
  pairwise    the issue's structure: best protocol depends on the algorithm, best channels on the protocol,
              best buffer on the algorithm, best threads on the channels
  sharp       a smooth mild background plus one sharp optimum (x1.25, neighbours x1.08) at a random point
  plateaus    pairwise, quantized to 6% steps (wide ties: descent sees no slope)
  issue120    pairwise on the issue's 4-variable, 120-config space
  large6      pairwise on a 6-variable, 2016-config space (target: 5%)
  h200_1x4 / h200_2x2   the recorded exhaustive GPU sweeps replayed (benchmarks/results/h200_search)
  heldout     written once after the sampler was final, not tuned on (see --families heldout)

  python benchmarks/search_landscapes.py --seeds 10 --out benchmarks/search_landscapes.md
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

# this script's checkout: its import path and the recorded results under benchmarks/ (packaged data: envmatrix.paths)
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from envmatrix.search.confirm import DEFAULT, confirm  # noqa: E402
from envmatrix.search.objective import EvalOutcome, parse_objectives  # noqa: E402
from envmatrix.search.space import SearchSpace, parse_search_space  # noqa: E402
from envmatrix.search.study import SearchSettings, make_sampler, run_search  # noqa: E402

NOISE = 0.03
M = 1048576
SPACES = {
    "five": {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": ["LL", "LL128", "Simple"],
             "NCCL_MIN_NCHANNELS": [2, 4, 8, 16, 32], "NCCL_BUFFSIZE": [M, 2 * M, 4 * M, 8 * M],
             "NCCL_NTHREADS": [64, 128, 256, 512]},
    "issue": {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": ["LL", "LL128", "Simple"],
              "NCCL_MIN_NCHANNELS": [2, 4, 8, 16, 32], "NCCL_BUFFSIZE": [M, 2 * M, 4 * M, 8 * M]},
    "six": {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": ["LL", "LL128", "Simple"], "NCCL_P2P_DISABLE": [None, 1],
            "NCCL_MIN_NCHANNELS": [1, 2, 4, 8, 16, 24, 32], "NCCL_BUFFSIZE": [M // 2, M, 2 * M, 4 * M, 8 * M, 16 * M],
            "NCCL_NTHREADS": [64, 128, 256, 512]},
    "held": {"NCCL_ALGO": [None, "Ring", "Tree"], "NCCL_PROTO": [None, "LL128", "Simple"],
             "NCCL_NET_GDR_LEVEL": [None, "LOC", "PHB"],
             "NCCL_MIN_NCHANNELS": [2, 4, 8, 16], "NCCL_NTHREADS": [64, 128, 256, 512], "NCCL_BUFFSIZE": [M, 4 * M, 16 * M]},
}


def make_space(name: str) -> SearchSpace:
    from envmatrix.catalog import load_catalog

    return parse_search_space({"space": SPACES[name]}, load_catalog(), {}, f"landscape {name}: search")


def positions(space: SearchSpace) -> list[Callable[[int], float]]:
    """Per variable: value index -> position in [0, 1] along its sorted (log) order; categorical -> index."""
    out = []
    for var in space.vars:
        vals = space.choices(var)
        nums = sorted((float(v), i) for i, v in enumerate(vals) if v is not None and v.replace(".", "").isdigit())
        if len(nums) >= 3:
            rank = {i: r / (len(nums) - 1) for r, (_, i) in enumerate(nums)}
            out.append(lambda i, rank=rank: rank.get(i, 0.5))  # unset sits mid-range
        else:
            out.append(lambda i: float(i))
    return out


def bump(x: float, peak: float, width: float, floor: float) -> float:
    return floor + (1 - floor) * math.exp(-((x - peak) / width) ** 2)


def _pairwise(space: SearchSpace, rng: random.Random, coupled: bool) -> dict[tuple, float]:
    """Choices get random base factors (per (algo, proto) pair when coupled); each knob a bump whose peak depends
    on a choice (coupled) or not."""
    pos = positions(space)
    choice_vars = [k for k, v in enumerate(space.vars) if not (len(space.choices(v)) >= 3 and all(
        c is not None and c.isdigit() for c in space.choices(v)))]
    knob_vars = [k for k in range(len(space.vars)) if k not in choice_vars]
    base: dict[tuple, float] = {}
    per_var = {k: [rng.uniform(0.6, 1.0) for _ in space.choices(space.vars[k])] for k in choice_vars}
    peaks: dict[tuple, float] = {}
    widths = {k: rng.uniform(0.25, 0.5) for k in knob_vars}
    floors = {k: rng.uniform(0.4, 0.75) for k in knob_vars}
    table = {}
    for row in space.allowed_rows():
        ckey = tuple(row[k] for k in choice_vars)
        if ckey not in base:
            base[ckey] = rng.uniform(0.55, 1.0) if coupled else math.prod(per_var[k][row[k]] for k in choice_vars)
        value = base[ckey]
        for j, k in enumerate(knob_vars):
            # coupled: the peak depends on one choice variable (rotating), and the last knob's peak on the first knob
            if coupled and j == len(knob_vars) - 1 and j > 0:
                key = ("knob", k, round(pos[knob_vars[0]](row[knob_vars[0]]), 3))
                peaks.setdefault(key, min(1.0, max(0.0, 1.0 - pos[knob_vars[0]](row[knob_vars[0]]) + rng.uniform(-0.2, 0.2))))
            elif coupled and choice_vars:
                c = choice_vars[j % len(choice_vars)]
                key = ("choice", k, row[c])
                peaks.setdefault(key, rng.random())
            else:
                key = ("sep", k)
                peaks.setdefault(key, rng.random())
            value *= bump(pos[k](row[k]), peaks[key], widths[k], floors[k])
        table[row] = value
    return table


def family_table(family: str, seed: int) -> tuple[SearchSpace, dict[tuple, float]]:
    rng = random.Random(f"{family}-{seed}")
    if family == "separable":
        space = make_space("five")
        return space, _pairwise(space, rng, coupled=False)
    if family == "pairwise":
        space = make_space("five")
        return space, _pairwise(space, rng, coupled=True)
    if family == "issue120":
        space = make_space("issue")
        return space, _pairwise(space, rng, coupled=True)
    if family == "large6":
        space = make_space("six")
        return space, _pairwise(space, rng, coupled=True)
    if family == "sharp":
        space = make_space("five")
        table = {r: 0.85 + 0.15 * v for r, v in _pairwise(space, rng, coupled=True).items()}
        peak = rng.choice(list(table))
        lay = _layout(space)
        best = max(table.values())
        for r in table:
            d = lay.distance(r, peak)
            table[r] *= 1.25 * best / table[peak] if d == 0 else (1.08 if d == 1 else 1.0)
        return space, table
    if family == "plateaus":
        space = make_space("five")
        table = _pairwise(space, rng, coupled=True)
        top = max(table.values())
        return space, {r: math.floor(v / top / 0.06) * 0.06 * top + 0.06 * top for r, v in table.items()}
    if family == "heldout":
        # Generated once after the sampler was final. Three-way interaction: the base factor of each
        # (algo, proto, gdr) triple is random, channels x threads form a diagonal ridge (their product matters)
        # whose position depends on the protocol, the buffer's peak on (algo, gdr).
        space = make_space("held")
        pos = positions(space)
        base, ridge, bpeak = {}, {}, {}
        table = {}
        for row in space.allowed_rows():
            a, p, g, c, t, b = row
            base.setdefault((a, p, g), rng.uniform(0.5, 1.0))
            ridge.setdefault(p, rng.uniform(0.6, 1.4))
            bpeak.setdefault((a, g), rng.random())
            diag = pos[3](c) + pos[4](t)
            table[row] = base[(a, p, g)] * bump(diag, ridge[p], 0.35, 0.45) * bump(pos[5](b), bpeak[(a, g)], 0.5, 0.6)
        return space, table
    if family.startswith("h200_"):
        sys.path.insert(0, str(REPO / "benchmarks"))
        from search_efficiency import load_search, table_from_store

        grid = family.split("_", 1)[1]
        from envmatrix.paths import conf_dir

        space, objectives, _ = load_search(conf_dir() / f"search_h200_{grid}.yaml")
        raw = table_from_store(REPO / "benchmarks" / "results" / "h200_search" / f"exhaustive_{grid}.sqlite.gz", space, objectives)
        return space, {r: v[0] for r, v in raw.items()}
    raise SystemExit(f"unknown family {family!r}")


_LAYOUTS: dict[int, Any] = {}


def _layout(space: SearchSpace) -> Any:
    from envmatrix.search.structured import Layout

    return _LAYOUTS.setdefault(id(space), Layout.of(space.space.values))


def default_row(space: SearchSpace, table: dict) -> Optional[tuple]:
    """The all-unset row when the space has one (the default env); else None (no default in this space)."""
    row = tuple(space.choices(v).index(None) if None in space.choices(v) else -1 for v in space.vars)
    return row if row in table else None


def run_one(space: SearchSpace, table: dict, sampler: str, seed: int, fractions: list[float]) -> dict[float, tuple[float, Optional[float]]]:
    """fraction -> (true(exported)/optimum, true(exported)/true(default) or None when the space has no default)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    noise = random.Random(seed * 7919 + 1)
    allowed = len(table)
    budget = max(1, math.ceil(max(fractions) * allowed))
    order: list[tuple] = []
    measured: list[float] = []

    def measure_row(row: tuple) -> float:
        return table[row] * (1 + noise.uniform(-NOISE, NOISE))

    def lookup(number: int, setup: Any) -> EvalOutcome:
        row = space.row_of({v: setup.assignments().get(v) for v in space.vars})
        if row not in table:
            return EvalOutcome(None, "not_in_table", "no result")
        order.append(row)
        measured.append(measure_row(row))
        return EvalOutcome([measured[-1]])

    objectives = parse_objectives(None, "bench", ["1x1"])
    study = optuna.create_study(directions=["maximize"], sampler=make_sampler(sampler, seed, allowed, space))
    settings = SearchSettings(trials=budget, sampler=sampler, seed=seed, storage=None, study_name="bench", max_failure_rate=1.0,
                              heartbeat_interval_s=3600, heartbeat_grace_s=1e9, top_k=3, baseline=False, max_forbidden_streak=10_000)
    run_search(study, space, objectives, lookup, settings)
    best = max(table.values())
    base = default_row(space, table)
    out = {}
    for f in fractions:
        n = max(1, math.ceil(f * allowed))
        seen: dict[tuple, float] = {}
        for row, v in zip(order[:n], measured[:n]):
            seen[row] = max(v, seen.get(row, -math.inf))
        top = sorted(seen, key=lambda r: -seen[r])[:3]
        labels = list(range(len(top))) + ([DEFAULT] if base is not None else [])
        c = confirm(labels, lambda r, lab: measure_row(base if lab == DEFAULT else top[lab]), repeats=3, max_repeats=3)
        row = base if c.decision.winner == DEFAULT else top[c.decision.winner]
        out[f] = (table[row] / best, None if base is None else table[row] / table[base])
    return out


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default="separable,pairwise,sharp,plateaus,issue120,h200_1x4,h200_2x2,large6")
    ap.add_argument("--samplers", default="structured,tpe,random")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    lines = ["| family | configs | sampler | 5% | 10% | 20% | 40% | worst exported / default |", "|---|---|---|---|---|---|---|---|"]
    for family in args.families.split(","):
        fractions = [0.05, 0.10, 0.20, 0.40]
        for sampler in args.samplers.split(","):
            t0 = time.time()
            per_f: dict[float, list[float]] = {f: [] for f in fractions}
            vs_default: list[float] = []
            size = 0
            for seed in range(args.seeds):
                space, table = family_table(family, seed)
                size = len(table)
                res = run_one(space, table, sampler, seed, fractions if family != "large6" else [0.05, 0.10])
                for f, (score, ratio) in res.items():
                    per_f[f].append(score)
                    if ratio is not None:
                        vs_default.append(ratio)
            cells = [f"{statistics.median(per_f[f]):.3f} (min {min(per_f[f]):.3f})" if per_f[f] else "-" for f in fractions]
            lines.append(f"| {family} | {size} | {sampler} | {' | '.join(cells)} | {f'{min(vs_default):.3f}' if vs_default else 'no default in space'} |")
            print(lines[-1], f"[{time.time() - t0:.0f}s]", flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
