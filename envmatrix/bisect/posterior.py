"""The posterior over a class of likely explanations, and which certificate probes each still needs.

The class: one culprit, an interacting pair or triple, two independent culprits (``HypothesisClass`` holds the
prior of each kind). Each explanation carries up to ``SLOTS`` certificate probes at the certify level; ``score``
rates a candidate probe by the bits it is expected to give plus the certificate probes it is expected to settle.
Atom sets are bit masks here (atom i = bit i).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Iterable, Optional

import numpy as np

from envmatrix.bisect.certificates import STRICT
from envmatrix.bisect.probe_cache import FAIL, PASS


@dataclass(frozen=True)
class HypothesisClass:
    singles: float = 0.55
    pairs: float = 0.25
    triples: float = 0.10
    two_singles: float = 0.10
    # "the baseline itself fails" (every set fails): only while the baseline has not been probed (exact mode
    # probes it lazily, since any passing probe proves it passes); it makes the search probe the baseline
    # when its probes keep failing.
    baseline_fails: float = 0.0
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

    if cls.baseline_fails > 0:
        add(0, 0, cls.baseline_fails, [(0, True)])
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


def to_mask(atoms: Iterable[int]) -> int:
    value = 0
    for a in atoms:
        value |= 1 << a
    return value


def to_atoms(mask: int, n: int) -> frozenset:
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
        fails = self.predict_fail(to_mask(atoms))
        agree = fails if outcome == FAIL else ~fails
        if self.flip == 0:
            self.logw = np.where(agree, self.logw, -np.inf)
        else:
            self.logw = self.logw + np.where(agree, math.log(1 - self.flip), math.log(self.flip))
            self.logw -= self.logw.max()
        self._w = None

    def establish(self, atoms: frozenset, outcome: str, implied: bool) -> None:
        """Mark certificate slots established by ``atoms`` having ``outcome`` (with monotone implication or exactly)."""
        t = np.uint64(to_mask(atoms))
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
        return [to_atoms(m, self.n) for m in masks]

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
