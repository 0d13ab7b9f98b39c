"""Runs and rounds (wall time in units of one run) that host bisect needs, by simulation beyond what runs here.

The planner and the search are the real ones (envmatrix.bisect.hosts.localise, which calls the real
find_culprits); only the cluster is simulated: a group of hosts is ``failing`` when it holds a bad host
(one that fails alone, like a host whose daemon cannot connect back) or both ends of a bad link, ``slow``
when it holds a slow host with a partner (a slow link shows only between hosts), else ``ok``. Culprits are
drawn at random per trial (seeded); the table gives mean and max over trials and checks every answer.

    python bench/host_bisect_costs.py            # writes the table to stdout (bench/host_bisect_costs.md)
"""

from __future__ import annotations

import random
import statistics
import sys
from dataclasses import dataclass, field

from envmatrix.bisect.hosts import FAILING, OK, SLOW, Evidence, localise


@dataclass
class SimulatedCluster:
    bad: set = field(default_factory=set)
    slow: set = field(default_factory=set)
    links: set = field(default_factory=set)  # frozensets of two hosts

    def verdict(self, group: tuple) -> str:
        hosts = set(group)
        if hosts & self.bad or any(link <= hosts for link in self.links):
            return FAILING
        if len(hosts) > 1 and hosts & self.slow:
            return SLOW
        return OK

    def run_round(self, number: int, groups: list) -> list:
        return [Evidence(number, g, self.verdict(g), f"sim-r{number}-{i}") for i, g in enumerate(groups)]

    def expected(self) -> set:
        return {(h,) for h in self.bad | self.slow} | {tuple(sorted(link)) for link in self.links}


CASES = {
    "1 bad host (fails alone)": lambda hosts, rng: SimulatedCluster(bad=set(rng.sample(hosts, 1))),
    "2 bad hosts (fail alone)": lambda hosts, rng: SimulatedCluster(bad=set(rng.sample(hosts, 2))),
    "1 slow host (only with others)": lambda hosts, rng: SimulatedCluster(slow=set(rng.sample(hosts, 1))),
    "2 slow hosts (only with others)": lambda hosts, rng: SimulatedCluster(slow=set(rng.sample(hosts, 2))),
    "1 bad link (a pair)": lambda hosts, rng: SimulatedCluster(links={frozenset(rng.sample(hosts, 2))}),
}


def measure(n: int, case: str, trials: int, seed: int = 0) -> dict:
    rng = random.Random(seed * 1000 + n)
    hosts = [f"node{i:02d}" for i in range(n)]
    rounds, runs, wrong = [], [], 0
    for _ in range(trials):
        cluster = CASES[case](hosts, rng)
        result = localise(hosts, cluster.run_round)
        rounds.append(result.rounds)
        runs.append(result.runs)
        wrong += set(result.culprits) != cluster.expected() or not result.complete
    return {"n": n, "case": case, "trials": trials, "rounds_mean": statistics.mean(rounds), "rounds_max": max(rounds),
            "runs_mean": statistics.mean(runs), "runs_max": max(runs), "wrong": wrong}


def main(trials: int = 200) -> int:
    print("| hosts | culprits | rounds mean | rounds max | runs mean | runs max | wrong answers |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    bad = 0
    for case in CASES:
        for n in (8, 16, 64):
            m = measure(n, case, trials)
            bad += m["wrong"]
            print(f"| {n} | {case} | {m['rounds_mean']:.2f} | {m['rounds_max']} | {m['runs_mean']:.1f} | {m['runs_max']} | {m['wrong']}/{trials} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
