#!/usr/bin/env python3
"""Probes launched by envmatrix's bisect over random culprit placements (issue 4's counting).

Every probe counts: the baseline, verifying the failing env fails, the search,
and the certificate probes (the repaired env passing is one of them).
Usage: python bench/bisect_probes.py [--trials 200] [--sizes 8,16,24,32,64]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from envmatrix.bisect.search import FAIL, PASS, find_culprits

SCENARIOS = {
    "1 culprit": lambda rng, n: [frozenset(rng.sample(range(n), 1))],
    "2-atom interaction": lambda rng, n: [frozenset(rng.sample(range(n), 2))],
    "3-atom interaction": lambda rng, n: [frozenset(rng.sample(range(n), 3))],
    "2 independent": lambda rng, n: [frozenset([a]) for a in rng.sample(range(n), 2)],
}
TARGETS_N24 = {"1 culprit": 8.5, "2-atom interaction": 12.5, "3-atom interaction": 17.0, "2 independent": 14.5}


def oracle_for(truth, flip=0.0, rng=None):
    def oracle(atoms):
        fails = any(m <= atoms for m in truth)
        if flip and rng.random() < flip:
            fails = not fails
        return FAIL if fails else PASS

    return oracle


def measure(n: int, scenario: str, trials: int, seed: int = 0) -> tuple[float, float, int]:
    rng = random.Random(seed * 1000 + n)
    counts, wrong = [], 0
    for t in range(trials):
        truth = SCENARIOS[scenario](rng, n)
        result = find_culprits(n, oracle_for(truth), seed=t)
        counts.append(result.probes)
        wrong += sorted(map(sorted, result.culprits)) != sorted(map(sorted, truth)) or not result.complete
    return statistics.fmean(counts), max(counts), wrong


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--sizes", default="8,16,24,32,64")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = ap.parse_args()
    print("| n | scenario | mean probes | max | wrong | target (n=24) | seconds |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in map(int, args.sizes.split(",")):
        for scenario in args.scenarios.split(","):
            t0 = time.time()
            mean, worst, wrong = measure(n, scenario, args.trials)
            target = TARGETS_N24[scenario] if n == 24 else ""
            print(f"| {n} | {scenario} | {mean:.2f} | {worst} | {wrong} | {target} | {time.time() - t0:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
