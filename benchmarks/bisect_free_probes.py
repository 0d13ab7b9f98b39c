#!/usr/bin/env python3
"""Probes saved by `bisect --failing GRID` seeding the sweep's stored results as known outcomes (issue 11.4).

Method (CPU, no processes): conf/aws_ofi.yaml's setup "0" has 9 atoms (4 NCCL_*, 2 LD_LIBRARY_PATH
prepends, 3 FI_*); setups 1..3 are subsets of it. For each placement of the truth (every single atom, every
pair of atoms; and the masked kind: atom x fails at init and masks atom y), the sweep's outcome of each setup
is what that truth gives, and the bisect of setup 0 runs `find_all_culprits` with and without those stored
outcomes as `known` (what cli/bisect.py passes via driver.stored_outcomes). Counted: probes launched.

Usage: PYTHONPATH=$PWD python benchmarks/bisect_free_probes.py
"""

from __future__ import annotations

import itertools
import statistics

import yaml

from envmatrix.bisect.peel import find_all_culprits
from envmatrix.bisect import PASS
from envmatrix.paths import conf_dir


def atoms_of(setup: dict) -> list[str]:
    out = []
    for var, value in setup.items():
        if isinstance(value, dict) and "prepend" in value:
            out += [f"{var}+={p}" for p in value["prepend"]]
        else:
            out.append(f"{var}={value}")
    return out


def main() -> int:
    conf = yaml.safe_load((conf_dir() / "aws_ofi.yaml").read_text())
    setups = {k: atoms_of(v) for k, v in conf["setups"].items()}
    atoms = setups["0"]
    index = {a: i for i, a in enumerate(atoms)}
    stored_sets = [frozenset(index[a] for a in setups[k]) for k in setups]  # setups 0..3 of the sweep on the grid
    n = len(atoms)
    kinds = {
        "1 culprit": [[frozenset({i})] for i in range(n)],
        "2-atom interaction": [[frozenset(p)] for p in itertools.combinations(range(n), 2)],
        "2 masked (2 lines)": [[frozenset({x}), frozenset({y})] for x, y in itertools.permutations(range(n), 2)],
    }
    print(f"conf/aws_ofi.yaml setup 0: {n} atoms; stored setups on the grid: {len(stored_sets)} (free probes)")
    print("| truth | cases | mean probes without stored | with stored | saved (mean) | all found |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kind, truths in kinds.items():
        without, with_, ok = [], [], 0
        for t, truth in enumerate(truths):
            masked = len(truth) == 2

            def oracle(s, truth=truth, masked=masked):
                for k, m in enumerate(truth):
                    if m <= s:
                        return ("init_error", "a") if (masked and k == 0) else ("collective_error", "b")
                return PASS

            known = {s: oracle(s) for s in stored_sets}
            a = find_all_culprits(n, oracle, seed=t, max_probes=10_000)
            b = find_all_culprits(n, oracle, seed=t, known=known, max_probes=10_000)
            without.append(a.probes)
            with_.append(b.probes)
            ok += a.complete and b.complete and sorted(map(sorted, b.culprits)) == sorted(map(sorted, truth))
        print(f"| {kind} | {len(truths)} | {statistics.fmean(without):.2f} | {statistics.fmean(with_):.2f} | "
              f"{statistics.fmean(without) - statistics.fmean(with_):.2f} | {ok}/{len(truths)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
