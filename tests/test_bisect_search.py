"""envmatrix.bisect.search: every minimal failing set, proven by real probes, with a probe cache."""

from __future__ import annotations

import itertools
import random

import pytest

from envmatrix.bisect.search import (
    FAIL,
    PASS,
    UNRESOLVED,
    certificate_tests,
    find_culprits,
    minimal_transversals,
)


class Oracle:
    """Monotone oracle over a family of minimal failing sets; records every launch."""

    def __init__(self, truth, flip=0.0, seed=0, unresolved=()):
        self.truth = [frozenset(m) for m in truth]
        self.flip, self.rng = flip, random.Random(seed)
        self.unresolved = {frozenset(u) for u in unresolved}
        self.launches: list[frozenset] = []

    def __call__(self, atoms):
        atoms = frozenset(atoms)
        self.launches.append(atoms)
        if atoms in self.unresolved:
            return UNRESOLVED
        fails = any(m <= atoms for m in self.truth)
        if self.flip and self.rng.random() < self.flip:
            fails = not fails
        return FAIL if fails else PASS


def outcome(truth, atoms):
    return FAIL if any(m <= atoms for m in truth) else PASS


def check(n, truth, seed=0):
    oracle = Oracle(truth)
    result = find_culprits(n, oracle, seed=seed)
    assert sorted(map(sorted, result.culprits)) == sorted(map(sorted, truth)), (truth, result.method)
    assert result.complete
    # no atom set launched twice, and the count is honest
    assert len(oracle.launches) == len(set(oracle.launches)) == result.probes
    # the certificate holds on real (launched) outcomes, directly or by monotone implication
    launched = {a: outcome(oracle.truth, a) for a in oracle.launches}
    for atoms, expected in certificate_tests(frozenset(range(n)), result.culprits):
        assert any(
            (o == expected == FAIL and t <= atoms) or (o == expected == PASS and atoms <= t) for t, o in launched.items()
        ), (atoms, expected)
    return result


STRUCTURES = {
    "single": lambda r, n: [r.sample(range(n), 1)],
    "pair": lambda r, n: [r.sample(range(n), 2)],
    "triple": lambda r, n: [r.sample(range(n), 3)],
    "two singles": lambda r, n: [[a] for a in r.sample(range(n), 2)],
    # outside the hypothesis class
    "quad": lambda r, n: [r.sample(range(n), 4)],
    "three singles": lambda r, n: [[a] for a in r.sample(range(n), 3)],
    "pair + single": lambda r, n: (lambda s: [s[:2], s[2:]])(r.sample(range(n), 3)),
    "overlapping pairs": lambda r, n: (lambda s: [s[:2], s[1:]])(r.sample(range(n), 3)),
    "two pairs": lambda r, n: (lambda s: [s[:2], s[2:]])(r.sample(range(n), 4)),
}


def test_minimal_transversals_and_certificates():
    sets = [frozenset({0, 1}), frozenset({1, 2})]
    assert sorted(map(sorted, minimal_transversals(sets))) == [[0, 2], [1]]
    certs = certificate_tests(frozenset(range(4)), sets)
    assert (frozenset({0, 1}), FAIL) in certs and (frozenset({0}), PASS) in certs
    assert (frozenset({0, 2, 3}), PASS) in certs and (frozenset({1, 3}), PASS) in certs


@pytest.mark.parametrize("k", [1, 2, 3])
def test_every_interaction_small_n(k):
    n = 6
    for m in itertools.combinations(range(n), k):
        check(n, [m])


def test_every_family_of_two_small_n():
    n = 5
    sets = [frozenset(s) for k in (1, 2) for s in itertools.combinations(range(n), k)]
    for a, b in itertools.combinations(sets, 2):
        if a <= b or b <= a:
            continue
        check(n, [a, b])


def test_out_of_class_families_small_n():
    n = 6
    for truth in ([[0, 1, 2, 3]], [[0], [3], [5]], [[0, 1], [1, 2]], [[0, 4], [2]], [[0, 1], [2, 3]], [[0, 1, 2], [2, 3, 4]]):
        check(n, truth)


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_random_structures_n24(name):
    rng = random.Random(hash(name) % 1000)
    for t in range(4):
        check(24, STRUCTURES[name](rng, 24), seed=t)


def test_tiny_n():
    check(1, [[0]])
    check(2, [[1]])
    check(2, [[0, 1]])
    check(2, [[0], [1]])


def test_probe_budget_within_targets_n24():
    rng = random.Random(5)
    counts = [check(24, [rng.sample(range(24), 1)], seed=t).probes for t in range(10)]
    assert max(counts) <= 11


def test_known_outcomes_are_used_not_relaunched():
    oracle = Oracle([[3, 5]])
    known = {frozenset(): PASS, frozenset(range(8)): FAIL}
    result = find_culprits(8, oracle, known=known)
    assert result.culprits == [frozenset({3, 5})] and result.complete
    assert frozenset() not in oracle.launches and frozenset(range(8)) not in oracle.launches


def test_unresolved_certificate_is_reported_not_retried():
    n = 10
    universe = frozenset(range(n))
    oracle = Oracle([[4]], unresolved=[universe - {4}])
    result = find_culprits(n, oracle)
    assert not result.complete
    assert universe - {4} in result.unresolved
    assert oracle.launches.count(universe - {4}) <= 1
    assert len(oracle.launches) == len(set(oracle.launches))


def test_unresolved_search_probes_are_skipped():
    n = 12
    rng = random.Random(1)
    noisy = {frozenset(rng.sample(range(n), rng.randint(2, 10))) for _ in range(40)}
    noisy -= {frozenset(range(n)), frozenset()}
    oracle = Oracle([[2, 7]], unresolved=noisy)
    result = find_culprits(n, oracle)
    assert len(oracle.launches) == len(set(oracle.launches))
    if result.complete:
        assert result.culprits == [frozenset({2, 7})]
    assert set(result.unresolved) <= noisy


def test_everything_unresolved_terminates():
    n = 8
    oracle = Oracle([[1]])
    always = lambda atoms: (oracle(atoms), UNRESOLVED)[1] if atoms not in (frozenset(), frozenset(range(n))) else oracle(atoms)
    result = find_culprits(n, always)
    assert not result.complete
    assert len(oracle.launches) == len(set(oracle.launches))


def test_baseline_failing_and_env_passing():
    assert find_culprits(4, Oracle([[]])).method == "baseline fails"
    result = find_culprits(4, Oracle([[9]]))
    assert result.method == "env passes" and not result.culprits


def test_flaky_repeats_accuracy_smoke():
    right = 0
    trials = 12
    for t in range(trials):
        rng = random.Random(t)
        truth = [rng.sample(range(12), 1 + t % 2)]
        result = find_culprits(12, Oracle(truth, flip=0.2, seed=100 + t), repeats=3, seed=t)
        right += sorted(map(sorted, result.culprits)) == sorted(map(sorted, truth))
        assert result.probes <= 400
    assert right >= trials - 1


def test_flaky_repeats_with_a_consistent_oracle_cost_k_runs_per_set():
    oracle = Oracle([[2]])
    result = find_culprits(8, oracle, repeats=3)
    assert result.culprits == [frozenset({2})] and result.complete
    # a consistent oracle settles every set in exactly K runs
    counts = {a: oracle.launches.count(a) for a in set(oracle.launches)}
    assert set(counts.values()) == {3}
