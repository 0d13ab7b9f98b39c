"""Find every minimal failing subset of atoms with few probes (pure; the oracle runs probes).

The failure is assumed monotone: adding atoms to a failing env keeps it
failing. The search keeps a posterior over a class of likely explanations
(one culprit, an interacting pair or triple, two independent culprits) and
greedily picks the probe that most reduces the expected remaining work:
the bits still needed to identify the explanation plus the certificate
probes the explanation will still need (a probe that is a certificate of
likely explanations is worth more than its information alone). The answer is
never taken from the model: it is returned only with a certificate of real
probes, at one of two levels (``certify``):

- ``explain``: each culprit set M fails on its own, M minus any one atom
  passes (M is minimal), and the env without every found atom passes (the
  repaired env: the found sets explain the whole failure);
- ``strict``: in addition, for every minimal hitting set H of the found sets,
  the env without H passes (no other culprit set exists, not even one that
  shares atoms with a found set).

``explain`` is what the issue-4 probe counts measure (like QuickXplain plus a
repaired-env check); the bisect driver then tries each culprit atom unset in
the full env during repair (the strict checks, which a user wants anyway: "does
changing this one variable fix it?") and continues the search from the cache
when one of them still fails. Without repair, or with flaky probes, the driver
asks the search for ``strict``.

When the class cannot explain what the probes showed, a model-free search
(prefix bisection plus dualisation) takes over from the cached outcomes and
the culprit sets already proven.

Flaky probes (``repeats=K`` with K > 1)
---------------------------------------
Every run of an atom set is a *vote*. A search probe runs its set until one
outcome has K votes (at most 2K-1 runs): that is its settled outcome. The
posterior, however, is fed every vote with a flip rate (``noise``, 0.2 by
default), so one unlucky settled outcome does not decide anything; the search
may run a set again (more repeats of that set) when that is the most
informative thing to do (that is a repeat of that set, never a new set for the
same atoms). Certificates are stricter: a certificate holds only when its exact
atom set was run and its expected outcome leads the other by at least K votes.
``Probes.confirm`` keeps running repeats of the set until the expected outcome
leads by K, or the other outcome leads by 2K (then the certificate is refuted),
at most ``8K`` runs of a set. The asymmetric stop means a true certificate is
seldom refuted by an unlucky streak, while a false one is accepted about as
rarely as with a symmetric K-lead test. Implications by monotonicity are not
used for certificates in this mode (two noisy outcomes can contradict each
other). The baseline and the full env are confirmed the same way (expected:
pass / fail) before the search concludes "baseline fails" or "env passes". A
refuted certificate only updates the posterior; the search goes on. After
``CERT_REJECTIONS`` refuted explanations the model-free search takes over (with
confirmed outcomes). When the probe budget runs out, the most likely answer is
returned with ``complete=False`` and method "budget".

With ``repeats=1`` outcomes are taken as exact: a probe is never launched for a
set whose outcome is cached or implied by monotonicity, and certificates may be
implied (a pass of a superset proves a pass).

Unresolved outcomes (skip, launch error, or a failure signature that says
nothing about this search's: see ``peel``, which runs one search per failure
signature and reads other signatures by their stage) carry no information: they are cached, never retried, and listed in the result;
``complete`` is False when a certificate could not be established.
"""

from __future__ import annotations

import functools
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


class BudgetExhausted(RuntimeError):
    pass


class Probes:
    """Outcome cache + repeat policy; the only way the search touches the oracle.

    ``run`` settles a set (first outcome to K votes, at most 2K-1 runs);
    ``confirm`` (flaky mode) runs more repeats of a set until one outcome leads
    by K votes. ``listener(atoms, outcome)`` is called for every single run.
    """

    def __init__(self, n: int, oracle: Oracle, repeats: int = 1, known: Optional[dict] = None, budget: int = 400) -> None:
        self.n, self.oracle, self.repeats, self.budget = n, oracle, max(1, repeats), budget
        self.cache: dict[frozenset, str] = dict(known or {})
        self.given: set[frozenset] = set(self.cache)
        self.votes: dict[frozenset, list[str]] = {}
        self.launched = 0
        self.trail: list[tuple[frozenset, str]] = []
        self.listener: Optional[Callable[[frozenset, str], None]] = None
        self.max_runs = 8 * self.repeats

    # -- single runs
    def _launch(self, atoms: frozenset) -> str:
        if self.launched >= self.budget:
            raise BudgetExhausted(f"probe budget of {self.budget} exhausted")
        outcome = self.oracle(atoms)
        if outcome not in (PASS, FAIL):
            outcome = UNRESOLVED
        self.launched += 1
        self.votes.setdefault(atoms, []).append(outcome)
        if self.listener is not None:
            self.listener(atoms, outcome)
        return outcome

    def _settle_votes(self, atoms: frozenset, value: str) -> str:
        self.cache[atoms] = value
        self.trail.append((atoms, value))
        return value

    def run(self, atoms: frozenset) -> str:
        """Settled outcome of ``atoms``; launches only when not cached."""
        if atoms in self.cache:
            return self.cache[atoms]
        return self.rerun(atoms)

    def rerun(self, atoms: frozenset) -> str:
        """One more round of repeats of ``atoms`` (first to K votes in this round); re-settles by all votes."""
        round_votes: list[str] = []
        while True:
            round_votes.append(self._launch(atoms))
            for value in (FAIL, PASS, UNRESOLVED):
                if round_votes.count(value) >= self.repeats:
                    return self._settle_votes(atoms, self._majority(atoms, value))
            if len(round_votes) >= 2 * self.repeats - 1:
                return self._settle_votes(atoms, self._majority(atoms, max((FAIL, PASS, UNRESOLVED), key=round_votes.count)))

    def _majority(self, atoms: frozenset, fallback: str) -> str:
        votes = self.votes.get(atoms, [])
        f, p = votes.count(FAIL), votes.count(PASS)
        if f == p == 0:
            return UNRESOLVED
        if f == p:
            return fallback
        return FAIL if f > p else PASS

    def lead(self, atoms: frozenset) -> tuple[Optional[str], int]:
        votes = self.votes.get(atoms, [])
        f, p = votes.count(FAIL), votes.count(PASS)
        if f == p:
            return None, 0
        return (FAIL, f - p) if f > p else (PASS, p - f)

    def exhausted(self, atoms: frozenset) -> bool:
        """True when ``atoms`` may not be run again (unresolved, or its run cap reached)."""
        if self.cache.get(atoms) == UNRESOLVED:
            return True
        return len(self.votes.get(atoms, [])) >= self.max_runs

    def confirmed(self, atoms: frozenset) -> Optional[str]:
        """Flaky mode: the outcome that leads by K votes (or was given as known); None otherwise."""
        if atoms in self.given:
            value = self.cache[atoms]
            return value if value != UNRESOLVED else None
        value, margin = self.lead(atoms)
        return value if margin >= self.repeats else None

    def confirm(self, atoms: frozenset, expected: Optional[str] = None) -> Optional[str]:
        """Run repeats of ``atoms`` until one outcome leads by K votes (None at the run cap / unresolved).

        With ``expected``, the other outcome must lead by 2K votes before it is returned (a sequential
        test that rarely rejects a true certificate on an unlucky streak, and accepts a false one about
        as rarely as the symmetric test).
        """
        if atoms in self.given:
            return self.confirmed(atoms)
        if atoms not in self.cache:
            self.run(atoms)
        while True:
            value, margin = self.lead(atoms)
            if value is not None and margin >= (self.repeats if expected in (None, value) else 2 * self.repeats):
                self.cache[atoms] = value
                return value
            if self.exhausted(atoms):
                return None
            self._launch(atoms)
            self.cache[atoms] = self._majority(atoms, self.cache.get(atoms, UNRESOLVED))

    # -- implications
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

    def decide(self, atoms: frozenset, expected: Optional[str] = None) -> str:
        """Deterministic mode: ``settle``; flaky mode: ``confirm`` (UNRESOLVED when it cannot)."""
        if self.repeats == 1:
            return self.settle(atoms)
        return self.confirm(atoms, expected) or UNRESOLVED

    def certified(self, atoms: frozenset, expected: str) -> bool:
        if self.repeats == 1:
            return self.known(atoms) == expected
        return self.confirmed(atoms) == expected


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


STRICT, EXPLAIN = "strict", "explain"
CERTIFY_LEVELS = (EXPLAIN, STRICT)


def certificate_tests(universe: frozenset, culprits: list[frozenset], certify: str = STRICT) -> list[tuple[frozenset, str]]:
    """(atom set, outcome it must have) pairs that prove ``culprits`` at the ``certify`` level."""
    needed: list[tuple[frozenset, str]] = []
    for m in culprits:
        needed.append((m, FAIL))
        needed += [(m - {x}, PASS) for x in sorted(m)]
    if certify == STRICT:
        needed += [(universe - h, PASS) for h in minimal_transversals(culprits)]
    else:
        needed.append((universe - frozenset().union(*culprits), PASS))
    return list(dict.fromkeys(needed))


# ---------------------------------------------------------------- model-free search


class _Stuck(Exception):
    pass


def shrink(probes: Probes, failing: frozenset, order: list[int]) -> frozenset:
    """A minimal failing subset of ``failing``: repeatedly find the last atom (in ``order``) still needed."""
    required: frozenset = frozenset()
    pool = [a for a in order if a in failing]
    while True:
        if probes.decide(required) == FAIL:
            return required
        lo, hi = 0, len(pool)  # required+pool[:lo] passes, required+pool[:hi] fails
        while hi - lo > 1:
            centre = (lo + hi) / 2
            for mid in sorted(range(lo + 1, hi), key=lambda m: abs(m - centre)):
                outcome = probes.decide(required | frozenset(pool[:mid]))
                if outcome != UNRESOLVED:
                    break
            else:
                raise _Stuck()
            if outcome == FAIL:
                hi = mid
            else:
                lo = mid
        required = required | {pool[hi - 1]}
        pool = pool[: hi - 1]


def proven_sets(probes: Probes, universe: frozenset, candidates: Iterable[frozenset]) -> list[frozenset]:
    """The candidate sets already proven to be minimal failing sets by cached outcomes."""
    out = []
    for m in candidates:
        if m and probes.certified(m, FAIL) and all(probes.certified(m - {x}, PASS) for x in m):
            out.append(m)
    return [m for m in dict.fromkeys(out) if not any(o < m for o in out)]


def model_free(probes: Probes, universe: frozenset, found: list[frozenset]) -> list[frozenset]:
    """Dualisation: while some minimal hitting set H leaves a failing env, shrink it to a new culprit set."""
    order = sorted(universe)
    found = list(found)
    blocked: set[frozenset] = set()
    while True:
        for h in minimal_transversals(found) if found else [frozenset()]:
            rest = universe - h
            if rest in blocked:
                continue
            outcome = probes.decide(rest)
            if outcome == UNRESOLVED:
                blocked.add(rest)
                continue
            if outcome == FAIL:
                try:
                    found.append(shrink(probes, rest, order))
                except _Stuck:
                    blocked.add(rest)
                    continue
                break
        else:
            return found


# ---------------------------------------------------------------- model-guided search


@dataclass(frozen=True)
class HypothesisClass:
    singles: float = 0.55
    pairs: float = 0.25
    triples: float = 0.10
    two_singles: float = 0.10
    max_triple_atoms: int = 64


def hypotheses(n: int, cls: HypothesisClass) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first set mask, second set mask, prior weight) for every explanation in the class."""
    m1, m2, w, _, _, _ = _table(n, cls, STRICT)
    return m1, m2, w


# Certificate probes per explanation. strict: for a set M of two or more atoms, "M minus x passes"
# follows from "the env without y passes" for any other y in M, so M failing and the env without
# each atom passing are the slots (a triple: 4). explain: M failing, the env without M passing and
# M minus each atom passing (a triple: 5).
SLOTS = 5


@functools.lru_cache(maxsize=8)
def _table(n: int, cls: HypothesisClass, certify: str):
    """Explanations with their certificate probes: masks, prior, slot masks, slot expects-fail, slot used."""
    m1, m2, w = [], [], []
    bit = [1 << i for i in range(n)]
    full = (1 << n) - 1
    slots, sfail = [], []

    def add(a: int, b: int, weight: float, cert: list[tuple[int, bool]]) -> None:
        m1.append(a)
        m2.append(b)
        w.append(weight)
        cert = cert + [(0, False)] * (SLOTS - len(cert))
        slots.append([c for c, _ in cert])
        sfail.append([f for _, f in cert])

    for i in range(n):
        add(bit[i], bit[i], cls.singles / n, [(bit[i], True), (full ^ bit[i], False)])
    pairs = list(itertools.combinations(range(n), 2))
    for i, j in pairs:
        m = bit[i] | bit[j]
        if cls.pairs > 0:
            cert = [(full ^ bit[i], False), (full ^ bit[j], False)] if certify == STRICT else [(full ^ m, False), (bit[i], False), (bit[j], False)]
            add(m, m, cls.pairs / len(pairs), [(m, True)] + cert)
        if cls.two_singles > 0:
            add(bit[i], bit[j], cls.two_singles / len(pairs), [(bit[i], True), (bit[j], True), (full ^ m, False)])
    if n <= cls.max_triple_atoms and cls.triples > 0:
        triples = list(itertools.combinations(range(n), 3))
        for i, j, k in triples:
            m = bit[i] | bit[j] | bit[k]
            if certify == STRICT:
                cert = [(m, True)] + [(full ^ bit[x], False) for x in (i, j, k)]
            else:
                cert = [(m, True), (full ^ m, False)] + [(m ^ bit[x], False) for x in (i, j, k)]
            add(m, m, cls.triples / len(triples), cert)
    sl = np.array(slots, dtype=np.uint64)
    sf = np.array(sfail, dtype=bool)
    used = (sl != 0) | sf
    w = np.array(w, dtype=float)
    w /= w.sum()
    return np.array(m1, dtype=np.uint64), np.array(m2, dtype=np.uint64), w, sl, sf, used


def _mask(atoms: Iterable[int]) -> int:
    value = 0
    for a in atoms:
        value |= 1 << a
    return value


def _atoms(mask: int, n: int) -> frozenset:
    return frozenset(b for b in range(n) if mask >> b & 1)


def _h2(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return -(p * np.log2(p) + (1 - p) * np.log2(1 - p))


class Model:
    """Posterior over the class plus, per explanation, which of its certificate probes are already established."""

    def __init__(self, n: int, cls: HypothesisClass, flip: float, certify: str = STRICT) -> None:
        self.n = n
        self.full = (1 << n) - 1
        self.m1, self.m2, w0, self.slot, self.sfail, used = _table(n, cls, certify)
        self.logw = np.log(w0)
        self.flip = flip
        self.open = used & ~((self.slot == 0) & ~self.sfail)  # the empty set passing is the baseline
        self._w: Optional[np.ndarray] = None

    # -- posterior
    @property
    def w(self) -> np.ndarray:
        if self._w is None:
            top = self.logw.max()
            w = np.exp(self.logw - top) if np.isfinite(top) else np.zeros_like(self.logw)
            s = w.sum()
            self._w = w / s if s > 0 else w
        return self._w

    def predict_fail(self, mask: int) -> np.ndarray:
        inv = np.uint64(~mask & self.full)
        return ((self.m1 & inv) == 0) | ((self.m2 & inv) == 0)

    def observe(self, atoms: frozenset, outcome: str) -> None:
        """One vote (flaky mode) or one settled outcome (exact mode)."""
        if outcome not in (PASS, FAIL):
            return
        fails = self.predict_fail(_mask(atoms))
        agree = fails if outcome == FAIL else ~fails
        if self.flip == 0:
            self.logw = np.where(agree, self.logw, -np.inf)
        else:
            self.logw = self.logw + np.where(agree, math.log(1 - self.flip), math.log(self.flip))
            self.logw -= self.logw.max()
        self._w = None

    def establish(self, atoms: frozenset, outcome: str, implied: bool) -> None:
        """Mark certificate slots established by ``atoms`` having ``outcome`` (with monotone implication or exactly)."""
        t = np.uint64(_mask(atoms))
        if outcome == PASS:
            hit = (self.slot == t) if not implied else ((self.slot & ~t) == 0)
            self.open &= ~(hit & ~self.sfail)
        elif outcome == FAIL:
            hit = (self.slot == t) if not implied else ((t & ~self.slot) == 0)
            self.open &= ~(hit & self.sfail)

    @property
    def alive(self) -> bool:
        return bool(np.isfinite(self.logw).any()) and bool(self.w.sum() > 0)

    def map_index(self) -> int:
        return int(np.argmax(self.w))

    def sets(self, i: int) -> list[frozenset]:
        masks = sorted({int(self.m1[i]), int(self.m2[i])})
        return [_atoms(m, self.n) for m in masks]

    def map_sets(self) -> list[frozenset]:
        return self.sets(self.map_index())

    def map_weight(self) -> float:
        return float(self.w.max())

    def p_fail(self, mask: int) -> float:
        return float(self.w[self.predict_fail(mask)].sum())

    def involvement(self, idx: np.ndarray) -> np.ndarray:
        """Posterior probability that each atom belongs to a culprit set."""
        union = self.m1[idx] | self.m2[idx]
        w = self.w[idx]
        bits = (union[:, None] >> np.arange(self.n, dtype=np.uint64)[None, :]) & np.uint64(1)
        return (bits.astype(bool) * w[:, None]).sum(0)

    def support(self, cap: int = 6000) -> np.ndarray:
        """Indices of the explanations worth scoring (all alive ones, or the heaviest ``cap``)."""
        w = self.w
        idx = np.nonzero(w > 1e-9 * w.max())[0]
        if len(idx) > cap:
            idx = idx[np.argsort(-w[idx])[:cap]]
        return idx

    def score(self, cands: list[int], idx: np.ndarray, lam: float, w: Optional[np.ndarray] = None, open_: Optional[np.ndarray] = None) -> np.ndarray:
        """Expected drop of (bits left to identify + certificate probes left) for each candidate set.

        ``w`` / ``open_`` (over ``idx``) replace the current posterior / open certificate slots (lookahead).
        """
        w = self.w[idx] if w is None else w
        w = w / w.sum()
        m1, m2 = self.m1[idx], self.m2[idx]
        slot, sfail = self.slot[idx], self.sfail[idx]
        open_ = self.open[idx] if open_ is None else open_
        pass_open = open_ & ~sfail
        fail_open = open_ & sfail
        out = np.empty(len(cands))
        chunk = max(1, 400_000 // max(1, len(idx)))
        for s in range(0, len(cands), chunk):
            t = np.array(cands[s : s + chunk], dtype=np.uint64)
            inv = ~t & np.uint64(self.full)
            pred = ((m1[None, :] & inv[:, None]) == 0) | ((m2[None, :] & inv[:, None]) == 0)
            p = pred.astype(float) @ w
            if self.flip:
                q = p * (1 - self.flip) + (1 - p) * self.flip
                info = _h2(q) - _h2(np.array(self.flip))
            else:
                info = _h2(p) * ((p > 1e-12) & (p < 1 - 1e-12))
            sub = (slot[None, :, :] & inv[:, None, None]) == 0  # slot within t: a pass of t proves it passes
            sup = (t[:, None, None] & ~slot[None, :, :]) == 0  # t within slot: a fail of t proves it fails
            gain_pass = (sub & pass_open[None]).sum(-1)
            gain_fail = (sup & fail_open[None]).sum(-1)
            gain = np.where(pred, gain_fail, gain_pass)
            out[s : s + chunk] = info + lam * (gain @ w)
        return out


def _candidates(model: Model, idx: np.ndarray, probes: Probes, universe: frozenset, rng: random.Random, flaky: bool) -> list[int]:
    n, full = model.n, model.full
    atoms = sorted(universe)
    inv = model.involvement(idx)
    ranked = sorted(atoms, key=lambda a: -inv[a])
    cands: list[int] = []
    # certificate probes of the likeliest explanations
    order = idx[np.argsort(-model.w[idx])[:12]]
    for i in order:
        for k in range(SLOTS):
            if model.open[i, k]:
                cands.append(int(model.slot[i, k]))
    pref = 0
    for a in ranked:
        pref |= 1 << a
        cands.append(pref)
        cands.append(full ^ pref)
    for a in ranked[:10]:
        cands.append(full ^ (1 << a))
        cands.append(1 << a)
    top = ranked[: min(len(ranked), 8)]
    for a, b in itertools.combinations(top, 2):
        cands.append((1 << a) | (1 << b))
        cands.append(full ^ ((1 << a) | (1 << b)))
    # random subsets, of everything and of the smallest failing set known
    failing = [_mask(a) for a, o in probes.cache.items() if o == FAIL]
    smallest = min(failing, key=lambda m: bin(m).count("1")) if failing else full
    small_atoms = [a for a in atoms if smallest >> a & 1]
    for _ in range(24):
        p = rng.choice((0.2, 0.35, 0.5, 0.65, 0.8))
        cands.append(_mask(a for a in atoms if rng.random() < p))
        cands.append(_mask(a for a in small_atoms if rng.random() < p))
    good = []
    for c in dict.fromkeys(cands):
        if c == 0 or c == full:
            continue
        fs = _atoms(c, n)
        if flaky:
            if probes.exhausted(fs):
                continue
        elif fs in probes.cache or probes.known(fs) is not None:
            continue
        good.append(c)
    return good


def _usable(c: int, model: Model, probes: Probes, flaky: bool) -> bool:
    if c == 0 or c == model.full:
        return False
    fs = _atoms(c, model.n)
    if flaky:
        return not probes.exhausted(fs)
    return fs not in probes.cache and probes.known(fs) is None


def choose_test(model: Model, probes: Probes, universe: frozenset, rng: random.Random, lam: float, flaky: bool) -> Optional[frozenset]:
    idx = model.support()
    cands = _candidates(model, idx, probes, universe, rng, flaky)
    if not cands:
        return None
    scores = model.score(cands, idx, lam)
    # local search: toggle single atoms of the best few candidates while that helps
    pool = {c: float(v) for c, v in zip(cands, scores)}
    for start in np.argsort(-scores)[:3]:
        cur, cur_score = cands[int(start)], float(scores[start])
        for _ in range(6):
            nbrs = [cur ^ (1 << a) for a in range(model.n)]
            nbrs = [c for c in nbrs if _usable(c, model, probes, flaky)]
            if not nbrs:
                break
            s = model.score(nbrs, idx, lam)
            j = int(np.argmax(s))
            if s[j] <= cur_score + 1e-9:
                break
            cur, cur_score = nbrs[j], float(s[j])
            pool[cur] = cur_score
    ranked = sorted(pool, key=lambda c: -pool[c])
    if pool[ranked[0]] <= 1e-6:
        return None
    return _atoms(ranked[0], model.n)


LAMBDA = 1.0
CERT_REJECTIONS = 10


def find_culprits(
    n: int,
    oracle: Oracle,
    *,
    repeats: int = 1,
    known: Optional[dict[frozenset, str]] = None,
    cls: HypothesisClass = HypothesisClass(),
    seed: int = 0,
    budget: int = 400,
    noise: Optional[float] = None,
    confidence: float = 0.9,
    certify: str = STRICT,
) -> SearchResult:
    """All minimal failing subsets of atoms 0..n-1, assuming the empty set passes and the full set fails.

    ``known`` may hold outcomes proven earlier (e.g. a baseline already in the
    store); the baseline and the full set are probed here otherwise.
    ``noise``: the flip rate the posterior assumes per vote when ``repeats`` > 1
    (default 0.2); ``confidence``: the posterior an explanation needs before its
    certificates are confirmed (flaky mode); ``certify``: ``strict`` or ``explain``
    (see the module docstring).
    """
    if certify not in CERTIFY_LEVELS:
        raise ValueError(f"certify: {certify!r} not allowed; allowed: {', '.join(CERTIFY_LEVELS)}")
    universe = frozenset(range(n))
    probes = Probes(n, oracle, repeats, known, budget)
    flaky = probes.repeats > 1
    flip = (0.2 if noise is None else noise) if flaky else 0.0
    rng = random.Random(seed)
    model = Model(n, cls, flip, certify)

    def record(atoms: frozenset, outcome: str) -> None:
        if flaky:
            model.observe(atoms, outcome)

    try:
        if probes.decide(frozenset(), PASS) != PASS:
            return SearchResult([], probes.launched, probes.trail, False, [frozenset()], "baseline fails")
        if probes.decide(universe, FAIL) != FAIL:
            unresolved = [universe] if probes.decide(universe, FAIL) == UNRESOLVED else []
            return SearchResult([], probes.launched, probes.trail, False, unresolved, "env passes")
    except BudgetExhausted:
        return SearchResult([], probes.launched, probes.trail, False, [], "budget")
    # outcomes known so far (given or just probed) feed the model
    for atoms, outcome in list(probes.cache.items()):
        if flaky and atoms not in probes.given:
            for vote in probes.votes.get(atoms, []):
                model.observe(atoms, vote)
        else:
            model.observe(atoms, outcome)
        if not flaky:
            model.establish(atoms, outcome, implied=True)
        elif probes.confirmed(atoms) is not None:
            model.establish(atoms, probes.confirmed(atoms), implied=False)
    probes.listener = record
    method = "model"
    culprits: list[frozenset] = []
    rejections = 0
    try:
        while model.alive and n > 1:
            i = model.map_index()
            sets = model.sets(i)
            certs = certificate_tests(universe, sets, certify)
            if not flaky:
                if all(probes.certified(a, o) for a, o in certs):
                    return _finish(probes, universe, certify, sets, method)
                # a certificate that can never be established: report the best explanation, incomplete
                stuck = [a for a, o in certs if not probes.certified(a, o) and probes.cache.get(a) == UNRESOLVED]
                if stuck and model.map_weight() > 0.999:
                    return _finish(probes, universe, certify, sets, method)
            elif model.map_weight() >= confidence:
                ok = True
                for atoms, expected in certs:
                    outcome = probes.confirm(atoms, expected)
                    if outcome is not None:
                        model.establish(atoms, outcome, implied=False)
                    if outcome != expected:
                        ok = False
                        break
                if ok:
                    return _finish(probes, universe, certify, sets, method)
                rejections += 1
                if outcome is None and model.map_index() == i and model.map_weight() >= confidence:
                    return _finish(probes, universe, certify, sets, method)  # cannot be certified: incomplete
                if rejections >= CERT_REJECTIONS:
                    break
                continue
            test = choose_test(model, probes, universe, rng, LAMBDA, flaky)
            if test is None:
                break
            outcome = probes.rerun(test) if (flaky and test in probes.cache) else probes.run(test)
            if not flaky:
                model.observe(test, outcome)
                model.establish(test, outcome, implied=True)
            elif probes.confirmed(test) is not None:
                model.establish(test, probes.confirmed(test), implied=False)
        method = "model-free"
        found = proven_sets(probes, universe, [s for a, o in probes.cache.items() if o == FAIL for s in [a]] + model.map_sets())
        culprits = model_free(probes, universe, found)
        return _finish(probes, universe, certify, culprits, method)
    except BudgetExhausted:
        best = culprits or (model.map_sets() if model.alive else [])
        return _finish(probes, universe, certify, best, "budget")


def _finish(probes: Probes, universe: frozenset, certify: str, culprits: list[frozenset], method: str) -> SearchResult:
    unresolved = [a for a, o in probes.cache.items() if o == UNRESOLVED]
    complete = bool(culprits) and all(probes.certified(a, expected) for a, expected in certificate_tests(universe, culprits, certify))
    return SearchResult(sorted(culprits, key=sorted), probes.launched, probes.trail, complete, unresolved, method)
