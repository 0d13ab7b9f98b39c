"""Probe selection: which atom set to probe next, greedily by ``Model.score`` over generated candidates."""

from __future__ import annotations

import itertools
import random
from typing import Optional

import numpy as np

from envmatrix.bisect.posterior import SLOTS, Model, to_atoms, to_mask
from envmatrix.bisect.probe_cache import FAIL, Probes


def _candidates(model: Model, idx: np.ndarray, probes: Probes, universe: frozenset, rng: random.Random, flaky: bool) -> list[int]:
    n, full = model.n, model.full
    atoms = sorted(universe)
    inv = model.involvement(idx)
    ranked = sorted(atoms, key=lambda a: -inv[a])
    cands: list[int] = [0]  # the baseline, while it is not known (exact mode probes it lazily)
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
    failing = [to_mask(a) for a, o in probes.cache.items() if o == FAIL]
    smallest = min(failing, key=lambda m: bin(m).count("1")) if failing else full
    small_atoms = [a for a in atoms if smallest >> a & 1]
    for _ in range(24):
        p = rng.choice((0.2, 0.35, 0.5, 0.65, 0.8))
        cands.append(to_mask(a for a in atoms if rng.random() < p))
        cands.append(to_mask(a for a in small_atoms if rng.random() < p))
    good = []
    for c in dict.fromkeys(cands):
        if c == full or (c == 0 and flaky):
            continue
        fs = to_atoms(c, n)
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
    fs = to_atoms(c, model.n)
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
    return to_atoms(ranked[0], model.n)


LAMBDA = 1.0
