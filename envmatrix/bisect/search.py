"""Find every minimal failing subset of atoms with few probes (pure; the oracle runs probes).

The failure is assumed monotone: adding atoms to a failing env keeps it
failing. The search keeps a posterior over a class of likely explanations
(one culprit, an interacting pair or triple, two independent culprits) and
picks the probe with the most expected information. The answer is never taken
from the model: it is returned only with a certificate of real probes --

- each culprit set M fails on its own,
- M minus any one atom passes (M is minimal),
- for every minimal hitting set H of the found sets, the env without H passes
  (no other culprit set exists).

When the class cannot explain what the probes showed, a model-free search
(prefix bisection plus dualisation) takes over from the cached outcomes.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

import numpy as np

PASS, FAIL, UNRESOLVED = "pass", "fail", "unresolved"

Oracle = Callable[[frozenset], str]


@dataclass
class SearchResult:
    culprits: list[frozenset]  # the minimal failing subsets (atom indices)
    probes: int  # probes launched (repeats included)
    trail: list[tuple[frozenset, str]]  # every probe in order with its settled outcome
    complete: bool  # certificates all hold
    unresolved: list[frozenset] = field(default_factory=list)
    method: str = "model"


class Probes:
    """Outcome cache + repeat policy; the only way the search touches the oracle."""

    def __init__(self, n: int, oracle: Oracle, repeats: int = 1, known: Optional[dict] = None, budget: int = 400) -> None:
        self.n, self.oracle, self.repeats, self.budget = n, oracle, max(1, repeats), budget
        self.cache: dict[frozenset, str] = dict(known or {})
        self.votes: dict[frozenset, list[str]] = {}
        self.launched = 0
        self.trail: list[tuple[frozenset, str]] = []

    def run(self, atoms: frozenset) -> str:
        if atoms in self.cache:
            return self.cache[atoms]
        if self.launched >= self.budget:
            raise RuntimeError(f"probe budget of {self.budget} exhausted")
        # repeats=K: up to 2K-1 runs, settled as soon as K agree (majority).
        votes = self.votes.setdefault(atoms, [])
        while True:
            outcome = self.oracle(atoms)
            self.launched += 1
            votes.append(outcome)
            for value in (FAIL, PASS, UNRESOLVED):
                if votes.count(value) >= self.repeats:
                    self.cache[atoms] = value
                    self.trail.append((atoms, value))
                    return value
            if len(votes) >= 2 * self.repeats - 1:
                value = max((FAIL, PASS, UNRESOLVED), key=votes.count)
                self.cache[atoms] = value
                self.trail.append((atoms, value))
                return value

    def known(self, atoms: frozenset) -> Optional[str]:
        """Outcome implied by monotonicity from cached probes (None when unknown)."""
        if atoms in self.cache and self.cache[atoms] != UNRESOLVED:
            return self.cache[atoms]
        for tested, outcome in self.cache.items():
            if outcome == FAIL and tested <= atoms:
                return FAIL
            if outcome == PASS and atoms <= tested:
                return PASS
        return None

    def settle(self, atoms: frozenset) -> str:
        implied = self.known(atoms)
        return implied if implied is not None else self.run(atoms)


# ---------------------------------------------------------------- certificates


def minimal_transversals(sets: list[frozenset]) -> list[frozenset]:
    """All minimal hitting sets of a small family (Berge's algorithm)."""
    result: list[frozenset] = [frozenset()]
    for s in sets:
        grown = []
        for h in result:
            if h & s:
                grown.append(h)
            else:
                grown.extend(h | {x} for x in s)
        grown = list(dict.fromkeys(grown))
        result = [h for h in grown if not any(o < h for o in grown)]
    return result


def certificate_tests(universe: frozenset, culprits: list[frozenset]) -> list[tuple[frozenset, str]]:
    """(atom set, outcome it must have) pairs that prove ``culprits`` is the full answer."""
    needed: list[tuple[frozenset, str]] = []
    for m in culprits:
        needed.append((m, FAIL))
        needed += [(m - {x}, PASS) for x in sorted(m)]
    needed += [(universe - h, PASS) for h in minimal_transversals(culprits)]
    return needed


# ---------------------------------------------------------------- model-free search


def shrink(probes: Probes, failing: frozenset, order: list[int]) -> frozenset:
    """A minimal failing subset of ``failing``: repeatedly find the last atom (in ``order``) still needed."""
    required: frozenset = frozenset()
    pool = [a for a in order if a in failing]
    while True:
        if probes.settle(required) == FAIL:
            return required
        lo, hi = 0, len(pool)  # required+pool[:lo] passes, required+pool[:hi] fails
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if probes.settle(required | frozenset(pool[:mid])) == FAIL:
                hi = mid
            else:
                lo = mid
        required = required | {pool[hi - 1]}
        pool = pool[: hi - 1]


def model_free(probes: Probes, universe: frozenset, found: list[frozenset]) -> list[frozenset]:
    """Dualisation: while some minimal hitting set H leaves a failing env, shrink it to a new culprit set."""
    order = sorted(universe)
    found = list(found)
    while True:
        for h in minimal_transversals(found) if found else [frozenset()]:
            rest = universe - h
            if probes.settle(rest) == FAIL:
                found.append(shrink(probes, rest, order))
                break
        else:
            return found


# ---------------------------------------------------------------- model-guided search


@dataclass(frozen=True)
class HypothesisClass:
    singles: float = 0.45
    pairs: float = 0.25
    triples: float = 0.1
    two_singles: float = 0.2
    max_triple_atoms: int = 64


def hypotheses(n: int, cls: HypothesisClass) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first set mask, second set mask, prior weight) for every explanation in the class."""
    m1, m2, w = [], [], []

    def add(a: int, b: int, weight: float) -> None:
        m1.append(a)
        m2.append(b)
        w.append(weight)

    bit = [1 << i for i in range(n)]
    for i in range(n):
        add(bit[i], bit[i], cls.singles / n)
    pairs = list(itertools.combinations(range(n), 2))
    for i, j in pairs:
        add(bit[i] | bit[j], bit[i] | bit[j], cls.pairs / len(pairs))
        add(bit[i], bit[j], cls.two_singles / len(pairs))
    if n <= cls.max_triple_atoms and cls.triples > 0:
        triples = list(itertools.combinations(range(n), 3))
        for i, j, k in triples:
            mask = bit[i] | bit[j] | bit[k]
            add(mask, mask, cls.triples / len(triples))
    return np.array(m1, dtype=np.uint64), np.array(m2, dtype=np.uint64), np.array(w, dtype=float)


def _mask(atoms: Iterable[int]) -> int:
    value = 0
    for a in atoms:
        value |= 1 << a
    return value


class Model:
    def __init__(self, n: int, cls: HypothesisClass, flip: float) -> None:
        self.n = n
        self.m1, self.m2, self.w = hypotheses(n, cls)
        self.flip = flip

    def predict_fail(self, mask: int) -> np.ndarray:
        inv = np.uint64(~mask & ((1 << self.n) - 1))
        return ((self.m1 & inv) == 0) | ((self.m2 & inv) == 0)

    def observe(self, atoms: frozenset, outcome: str) -> None:
        if outcome == UNRESOLVED:
            return
        fails = self.predict_fail(_mask(atoms))
        agree = fails if outcome == FAIL else ~fails
        self.w = self.w * np.where(agree, 1.0 - self.flip, self.flip)
        total = self.w.sum()
        if total > 0:
            self.w /= total

    @property
    def alive(self) -> bool:
        return bool(self.w.sum() > 0)

    def map_sets(self) -> list[frozenset]:
        i = int(np.argmax(self.w))
        sets = {int(self.m1[i]), int(self.m2[i])}
        return [frozenset(b for b in range(self.n) if m >> b & 1) for m in sorted(sets)]

    def map_weight(self) -> float:
        return float(self.w.max())

    def p_fail(self, mask: int) -> float:
        return float(self.w[self.predict_fail(mask)].sum())

    def involvement(self) -> np.ndarray:
        """Posterior probability that each atom belongs to a culprit set."""
        out = np.zeros(self.n)
        union = self.m1 | self.m2
        for b in range(self.n):
            out[b] = self.w[(union >> np.uint64(b)) & np.uint64(1) == 1].sum()
        return out


def _entropy(p: float) -> float:
    if p <= 0 or p >= 1:
        return 0.0
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def candidate_tests(model: Model, universe: frozenset, rng: random.Random) -> list[frozenset]:
    atoms = sorted(universe)
    involvement = model.involvement()
    ranked = sorted(atoms, key=lambda a: -involvement[a])
    cands: list[frozenset] = []
    for k in range(1, len(ranked)):
        cands.append(frozenset(ranked[:k]))  # the most suspicious atoms alone
        cands.append(universe - frozenset(ranked[:k]))  # everything but them
    for _ in range(48):
        p = rng.choice((0.2, 0.35, 0.5, 0.65, 0.8))
        cands.append(frozenset(a for a in atoms if rng.random() < p))
    top = ranked[: min(len(ranked), 8)]
    for a, b in itertools.combinations(top, 2):
        cands.append(frozenset((a, b)))
        cands.append(universe - {a, b})
    return list(dict.fromkeys(c for c in cands if c))


def top_sets(model: Model, k: int) -> list[list[frozenset]]:
    order = np.argsort(-model.w)[:k]
    out = []
    for i in order:
        masks = sorted({int(model.m1[i]), int(model.m2[i])})
        out.append([frozenset(b for b in range(model.n) if m >> b & 1) for m in masks])
    return out


CERTIFICATE_BONUS = 0.05
CERTIFY_AT = 0.6


def choose_test(model: Model, probes: Probes, universe: frozenset, rng: random.Random) -> Optional[frozenset]:
    best, best_score = None, 0.0
    certs = {atoms for sets in top_sets(model, 6) for atoms, _ in certificate_tests(universe, sets)}
    for cand in list(certs) + candidate_tests(model, universe, rng):
        if probes.known(cand) is not None or cand in probes.cache:
            continue
        score = _entropy(model.p_fail(_mask(cand))) + (CERTIFICATE_BONUS if cand in certs else 0.0)
        if score > best_score + 1e-12:
            best, best_score = cand, score
    return best if best_score > 1e-6 else None


def find_culprits(
    n: int,
    oracle: Oracle,
    *,
    repeats: int = 1,
    known: Optional[dict[frozenset, str]] = None,
    cls: HypothesisClass = HypothesisClass(),
    seed: int = 0,
    budget: int = 400,
) -> SearchResult:
    """All minimal failing subsets of atoms 0..n-1, assuming the empty set passes and the full set fails.

    ``known`` may hold outcomes proven earlier (e.g. a baseline already in the
    store); the baseline and the full set are probed here otherwise.
    """
    universe = frozenset(range(n))
    probes = Probes(n, oracle, repeats, known, budget)
    rng = random.Random(seed)
    if probes.settle(frozenset()) != PASS:
        return SearchResult([], probes.launched, probes.trail, False, [frozenset()], "baseline fails")
    if probes.settle(universe) != FAIL:
        return SearchResult([], probes.launched, probes.trail, False, [universe] if probes.cache.get(universe) == UNRESOLVED else [], "env passes")
    flip = 0.0 if repeats == 1 else 0.08
    model = Model(n, cls, flip)
    for atoms, outcome in list(probes.cache.items()):
        model.observe(atoms, outcome)
    method = "model"
    while model.alive:
        if model.map_weight() > (CERTIFY_AT if flip == 0 else 0.995):
            culprits = model.map_sets()
            contradicted = False
            for atoms, expected in certificate_tests(universe, culprits):
                outcome = probes.settle(atoms)
                model.observe(atoms, outcome)
                if outcome != expected:
                    contradicted = True
                    break
            if not contradicted:
                return _finish(probes, universe, culprits, method)
            continue
        test = choose_test(model, probes, universe, rng)
        if test is None:
            break
        model.observe(test, probes.run(test))
    method = "model-free"
    culprits = model_free(probes, universe, [])
    return _finish(probes, universe, culprits, method)


def _finish(probes: Probes, universe: frozenset, culprits: list[frozenset], method: str) -> SearchResult:
    unresolved = [a for a, o in probes.cache.items() if o == UNRESOLVED]
    complete = all(probes.known(a) == expected for a, expected in certificate_tests(universe, culprits))
    return SearchResult(sorted(culprits, key=sorted), probes.launched, probes.trail, complete, unresolved, method)
