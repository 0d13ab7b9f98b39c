#!/usr/bin/env python3
"""Probes launched by envmatrix's bisect over random culprit placements (issue 4's counting).

Every probe launched counts: verifying the failing env fails, the search, the
certificate probes (the repaired env passing is one of them) and the baseline
when it is launched (exact mode launches it only when no passing probe proves it).
``--certify explain`` (default) is what `envmatrix bisect` does before repair:
each set fails alone, is minimal, and the env without all of them passes;
``--certify strict`` also proves that no other culprit set shares atoms with a
found one (the checks the repair's unset probes make in a real run).
A trial is `wrong` when the culprit sets differ from the truth or the result is
not complete (certified).

The flaky section runs `find_all_culprits(..., repeats=3)` (default cap) against an oracle that
flips every single run with probability 0.2 (independently) and reports the
share of runs that name exactly the right culprit sets, and the probes launched
(repeats included).

Every kind runs through ``find_all_culprits`` (the per-signature peeling search
the CLI runs); "2 masked (2 lines)": two single culprits, the first fails at
init with one line and masks the second, which fails at the first collective
with another line. ``--placement-seed`` picks the family: 0 = tuning family;
1 and 7 = earlier held-out families (seen since); 1001 = the held-out family of
the lazy-baseline search; 39 = issue 39's first measurement at 24 and 40; 3940
(uniform) and 3941 (adjacent, spread) = the held-out families of issue 39 point 11
(each run once, nothing changed after).

Placements: each trial draws the culprit positions uniformly among the n atoms,
which is a random atom order. Values are not simulated because the search never
sees them: it sees atom indices and outcomes only, and a value matters only
through the outcome of a probe, which the placement (which atoms are culprits)
decides here. So random values with the same culprit placement give the same
probes, and random positions cover random orders.

``--placement`` picks where the culprits sit: uniform (default), adjacent or spread (see PLACEMENTS); the search
orders atoms by its own seeded shuffle, so every placement should cost what a uniform one does.

Usage: python benchmarks/bisect_probes.py [--trials 200] [--sizes 8,16,24,32,64] [--placement uniform]
       [--flaky-trials 200] [--flaky-sizes 16,24]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from envmatrix.bisect.peel import find_all_culprits
from envmatrix.bisect import EXPLAIN, FAIL, PASS, STRICT

# kind: (culprit atoms, whether they fail only together)
KINDS = {"1 culprit": (1, True), "2-atom interaction": (2, True), "3-atom interaction": (3, True),
         "2 independent": (2, False), "2 masked (2 lines)": (2, False)}
# Where the culprits sit in the env. uniform: anywhere (a random atom order); adjacent: next to each other (related
# variables written together in a site script); spread: evenly apart (one near the top, one near the bottom).
def _adjacent(rng: random.Random, n: int, k: int) -> list[int]:
    start = rng.randrange(n - k + 1)
    return list(range(start, start + k))


def _spread(rng: random.Random, n: int, k: int) -> list[int]:
    start = rng.randrange(n // k)
    return [start + j * (n // k) for j in range(k)]


PLACEMENTS = {"uniform": lambda rng, n, k: rng.sample(range(n), k), "adjacent": _adjacent, "spread": _spread}


def draw(rng: random.Random, n: int, scenario: str, placement: str = "uniform") -> list[frozenset]:
    k, together = KINDS[scenario]
    positions = PLACEMENTS[placement](rng, n, k)
    return [frozenset(positions)] if together else [frozenset([a]) for a in positions]


SCENARIOS = {kind: (lambda rng, n, kind=kind: draw(rng, n, kind)) for kind in KINDS}
# issue 11 (24 atoms) and issue 39 point 11 (24 and 40 variables)
TARGETS = {24: dict(zip(KINDS, (8.5, 12.5, 17.0, 14.5, 16.0))), 40: dict(zip(KINDS, (9.2, 14.0, 19.3, 16.0, 17.5)))}
# the first set fails at init and masks the second, which fails at the first collective (another line)
MASKED = "2 masked (2 lines)"
FLAKY_SCENARIOS = ("1 culprit", "2-atom interaction")


def oracle_for(truth, flip=0.0, rng=None):
    def oracle(atoms):
        fails = any(m <= atoms for m in truth)
        if flip and rng.random() < flip:
            fails = not fails
        return FAIL if fails else PASS

    return oracle


def sig_oracle_for(truth, masked: bool):
    """Signatures: one line for every set; with ``masked`` the first set fails at init, the second later."""

    def oracle(atoms):
        for k, m in enumerate(truth):
            if m <= atoms:
                if masked:
                    return ("init_error", "net ib unavailable") if k == 0 else ("collective_error", "pat unsupported")
                return ("collective_error", "the failure line")
        return PASS

    return oracle


def same(culprits, truth) -> bool:
    return sorted(map(sorted, culprits)) == sorted(map(sorted, truth))


def measure(n: int, scenario: str, trials: int, seed: int = 0, certify: str = EXPLAIN,
            placement: str = "uniform") -> tuple[float, float, int]:
    rng = random.Random(seed * 1000 + n)
    counts, wrong = [], 0
    for t in range(trials):
        truth = draw(rng, n, scenario, placement)
        # what `envmatrix bisect` runs: every signature, peeled, each probe counted (no cap, to see the tail)
        result = find_all_culprits(n, sig_oracle_for(truth, scenario == MASKED), seed=t, certify=certify, max_probes=10_000)
        counts.append(result.probes)
        wrong += not same(result.culprits, truth) or not result.complete
    return statistics.fmean(counts), max(counts), wrong


def quickxplain_probes(n: int, truth) -> int:
    """Distinct probes of QuickXplain (Junker 2004) with this bench's counting: baseline, the failing env,
    QuickXplain's checks, the found set alone and the repaired env (the env without one found atom)."""
    cache: dict[frozenset, bool] = {}

    def fails(atoms) -> bool:
        atoms = frozenset(atoms)
        if atoms not in cache:
            cache[atoms] = any(m <= atoms for m in truth)
        return cache[atoms]

    def qx(background: list, delta: list, candidates: list) -> list:
        if delta and fails(background):
            return []
        if len(candidates) == 1:
            return list(candidates)
        k = len(candidates) // 2
        first, second = candidates[:k], candidates[k:]
        d2 = qx(background + first, first, second)
        d1 = qx(background + d2, d2, first)
        return d1 + d2

    fails(()), fails(range(n))
    found = qx([], [], list(range(n)))
    fails(found)
    fails(set(range(n)) - {found[0]})
    return len(cache)


def measure_quickxplain(n: int, scenario: str, trials: int, seed: int = 0) -> float:
    rng = random.Random(seed * 1000 + n)
    return statistics.fmean(quickxplain_probes(n, SCENARIOS[scenario](rng, n)) for _ in range(trials))


def measure_flaky(n: int, scenario: str, trials: int, flip: float = 0.2, repeats: int = 3, seed: int = 0):
    rng = random.Random(seed * 1000 + n + 7)
    counts, right, complete = [], 0, 0
    for t in range(trials):
        truth = SCENARIOS[scenario](rng, n)
        # flaky probes: the driver has the search certify strictly (repair probes run once, not repeated)
        flipper = oracle_for(truth, flip, random.Random(10_000 * (seed + 1) + t))
        # what `envmatrix bisect --repeats` runs: the peeling search with its default probe cap
        result = find_all_culprits(n, lambda s: ("exit_error", "x") if flipper(s) == FAIL else PASS, repeats=repeats, seed=t, certify=STRICT)
        counts.append(result.probes)
        right += same(result.culprits, truth)
        complete += same(result.culprits, truth) and result.complete
    return right / trials, complete / trials, statistics.fmean(counts), max(counts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--sizes", default="8,16,24,32,64")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--flaky-trials", type=int, default=200)
    ap.add_argument("--flaky-sizes", default="16,24")
    ap.add_argument("--certify", choices=(EXPLAIN, STRICT), default=EXPLAIN)
    ap.add_argument("--placement-seed", type=int, default=0, help="seed of the random culprit placements")
    ap.add_argument("--placement", choices=tuple(PLACEMENTS), default="uniform", help="where culprits sit in the env")
    ap.add_argument("--quickxplain", action="store_true", help="also print QuickXplain's probe counts (reference)")
    args = ap.parse_args()
    if args.quickxplain:
        for n in map(int, args.sizes.split(",")):
            row = [f"{measure_quickxplain(n, sc, max(args.trials, 1), args.placement_seed):.2f}" for sc in SCENARIOS if sc not in ("2 independent", MASKED)]
            print(f"QuickXplain (one set, + found set alone + repaired env), n={n}: " + " / ".join(row))
    if args.trials > 0:
        print("| n | scenario | mean probes | max | wrong | target | seconds |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for n in map(int, args.sizes.split(",")):
            for scenario in args.scenarios.split(","):
                t0 = time.time()
                mean, worst, wrong = measure(n, scenario, args.trials, args.placement_seed, args.certify,
                                             args.placement)
                target = TARGETS.get(n, {}).get(scenario, "")
                print(f"| {n} | {scenario} | {mean:.2f} | {worst} | {wrong} | {target} | {time.time() - t0:.1f} |", flush=True)
    if args.flaky_trials > 0 and args.flaky_sizes:
        print()
        print("Flaky: repeats=3, each run flipped with probability 0.2")
        print()
        print("| n | scenario | right culprits | right and complete | mean probes | max | seconds |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for n in map(int, args.flaky_sizes.split(",")):
            for scenario in FLAKY_SCENARIOS:
                t0 = time.time()
                acc, acc_complete, mean, worst = measure_flaky(n, scenario, args.flaky_trials)
                print(f"| {n} | {scenario} | {acc:.3f} | {acc_complete:.3f} | {mean:.1f} | {worst} | {time.time() - t0:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
