"""Runs and rounds (wall time in units of one run) that host bisect needs, by simulation beyond what runs here.

The planner and the search are the real ones (envmatrix.bisect.hosts.localise, which calls the real
find_culprits for interactions of three or more hosts); only the cluster is simulated: a group of hosts is
``failing`` when it holds a host bad alone (a daemon that cannot connect back) or both ends of a bad link,
``slow`` when it holds a host slow alone (a slow GPU: slow in every group) or a host slow only with partners
(a rate-limited NIC: a one-host run does not use it) in a group of two or more, else ``ok``. Every answer is
checked against the truth: the culprit set must be exact and the search complete (rest proven together).

    python benchmarks/host_bisect_costs.py placements 16   # every placement of the fault(s) among 16 hosts
    python benchmarks/host_bisect_costs.py random 12,24,32 --trials 200 --seed S   # random placements (seeded)
    python benchmarks/host_bisect_costs.py link 64 --trials 50 --seed S            # one bad link: rounds, runs
    python benchmarks/host_bisect_costs.py table --trials 200                      # 1 and 2 bad hosts, 8/16/64

Exit 1 when any answer is wrong (or, for ``placements``/``random``, one bad host took more than 3 rounds).
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
from dataclasses import dataclass, field
from typing import Optional

from envmatrix.bisect.hosts import FAILING, OK, SLOW, Evidence, localise

ONE_HOST_ROUNDS = 3  # issue 20's goal: one bad host among 16 in at most 3 rounds


@dataclass
class SimulatedCluster:
    bad: set = field(default_factory=set)  # fail alone and in any group
    slow: set = field(default_factory=set)  # slow only with partners
    slow_alone: set = field(default_factory=set)  # slow alone and in any group
    links: set = field(default_factory=set)  # frozensets of two hosts

    def verdict(self, group: tuple) -> str:
        hosts = set(group)
        if hosts & self.bad or any(link <= hosts for link in self.links):
            return FAILING
        if hosts & self.slow_alone or len(hosts) > 1 and hosts & self.slow:
            return SLOW
        return OK

    def run_round(self, number: int, groups: list) -> list:
        return [Evidence(number, g, self.verdict(g), f"sim-r{number}-{i}") for i, g in enumerate(groups)]

    def expected(self) -> set:
        return {(h,) for h in self.bad | self.slow | self.slow_alone} | {tuple(sorted(link)) for link in self.links}


# fault kind -> (how many hosts it names, the cluster with those hosts faulty)
KINDS = {
    "1 host failing alone": (1, lambda h: SimulatedCluster(bad=set(h))),
    "1 host slow alone": (1, lambda h: SimulatedCluster(slow_alone=set(h))),
    "1 host slow only with partners": (1, lambda h: SimulatedCluster(slow=set(h))),
    "1 bad link (a pair)": (2, lambda h: SimulatedCluster(links={frozenset(h)})),
    "2 hosts failing alone": (2, lambda h: SimulatedCluster(bad=set(h))),
    "2 hosts slow only with partners": (2, lambda h: SimulatedCluster(slow=set(h))),
    "1 failing alone + 1 slow with partners": (2, lambda h: SimulatedCluster(bad={h[0]}, slow={h[1]})),
}


def _one(hosts: list, kind: str, faulty: tuple) -> tuple:
    cluster = KINDS[kind][1](faulty)
    result = localise(hosts, cluster.run_round)
    wrong = set(result.culprits) != cluster.expected() or not result.complete
    return result.rounds, result.runs, wrong


def _row(n: int, kind: str, placements: list) -> dict:
    hosts = [f"node{i:02d}" for i in range(n)]
    got = [_one(hosts, kind, tuple(hosts[i] for i in p)) for p in placements]
    rounds, runs = [g[0] for g in got], [g[1] for g in got]
    return {"n": n, "kind": kind, "cases": len(got), "rounds_median": statistics.median(rounds), "rounds_mean": statistics.mean(rounds),
            "rounds_max": max(rounds), "runs_median": statistics.median(runs), "runs_mean": statistics.mean(runs), "runs_max": max(runs),
            "wrong": sum(g[2] for g in got)}


def _print(rows: list) -> int:
    print("| hosts | fault | cases | rounds median | rounds mean | rounds max | runs median | runs mean | runs max | wrong |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    bad = 0
    for r in rows:
        over = KINDS[r["kind"]][0] == 1 and r["rounds_max"] > ONE_HOST_ROUNDS
        bad += r["wrong"] + over
        print(f"| {r['n']} | {r['kind']} | {r['cases']} | {r['rounds_median']:g} | {r['rounds_mean']:.2f} | {r['rounds_max']}{' (>3!)' if over else ''} "
              f"| {r['runs_median']:g} | {r['runs_mean']:.1f} | {r['runs_max']} | {r['wrong']}/{r['cases']} |")
    return 1 if bad else 0


def placements_row(n: int, kind: str, cases: Optional[list] = None) -> dict:
    """Every placement of ``kind`` among n hosts (each host; each pair, ordered when the two differ), or ``cases``."""
    if cases is None:
        k = KINDS[kind][0]
        cases = list(itertools.permutations(range(n), 2) if kind.startswith("1 failing alone +") else itertools.combinations(range(n), k))
    return _row(n, kind, cases)


def placements(n: int) -> int:
    return _print([placements_row(n, kind) for kind in KINDS])


def random_placements(sizes: list, trials: int, seed: int) -> int:
    rng = random.Random(seed)
    rows = [_row(n, kind, [tuple(rng.sample(range(n), k)) for _ in range(trials)]) for n in sizes for kind, (k, _) in KINDS.items()]
    return _print(rows)


def link(n: int, trials: int, seed: int) -> int:
    rng = random.Random(seed)
    return _print([_row(n, "1 bad link (a pair)", [tuple(rng.sample(range(n), 2)) for _ in range(trials)])])


def table(trials: int, seed: int) -> int:
    rng = random.Random(seed)
    kinds = ["1 host failing alone", "1 host slow only with partners", "2 hosts failing alone", "2 hosts slow only with partners", "1 bad link (a pair)"]
    return _print([_row(n, kind, [tuple(rng.sample(range(n), KINDS[kind][0])) for _ in range(trials)]) for kind in kinds for n in (8, 16, 64)])


def main(argv: list) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["placements", "random", "link", "table"])
    p.add_argument("hosts", nargs="?", default="16", help="host count(s), comma separated")
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    sizes = [int(x) for x in a.hosts.split(",")]
    if a.what == "placements":
        return max(placements(n) for n in sizes)
    if a.what == "random":
        return random_placements(sizes, a.trials, a.seed)
    if a.what == "link":
        return max(link(n, a.trials, a.seed) for n in sizes)
    return table(a.trials, a.seed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
