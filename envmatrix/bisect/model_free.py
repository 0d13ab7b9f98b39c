"""The model-free fallback: prefix bisection plus dualisation, from the cached outcomes and the sets already proven.

Used when the hypothesis class (``posterior``) cannot explain what the probes showed, or keeps having its
certificates refuted: it needs no prior and finds every minimal failing set of a monotone failure.
"""

from __future__ import annotations

from envmatrix.bisect.certificates import minimal_transversals
from envmatrix.bisect.probe_cache import FAIL, UNRESOLVED, Probes


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
