"""Certificates: the real probes that prove a set of culprit sets (``explain`` or ``strict``, see ``culprits``)."""

from __future__ import annotations

from typing import Iterable

from envmatrix.bisect.probe_cache import FAIL, PASS, Probes


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



def proven_sets(probes: Probes, universe: frozenset, candidates: Iterable[frozenset]) -> list[frozenset]:
    """The candidate sets already proven to be minimal failing sets by cached outcomes."""
    out = []
    for m in candidates:
        if m and probes.certified(m, FAIL) and all(probes.certified(m - {x}, PASS) for x in m):
            out.append(m)
    return [m for m in dict.fromkeys(out) if not any(o < m for o in out)]
