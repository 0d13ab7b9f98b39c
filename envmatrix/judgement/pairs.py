"""Which pair, which host is slow: the outlier judgement over a pair test (pure).

A pair is slow when its figure (bandwidth: higher is better) is more than ``tolerance`` below the median of the
other pairs of its round: a round's pairs ran at the same time on the same fabric, so the round is the fair
reference. Never its own figure: in a round of two pairs (every round of 4 hosts) a median with its own is the mean
of the two, and a pair had to be (1 - t) / (1 + t) of the other to be slow (9x below at --pair-tolerance 0.8, not
5x; CI run 90: node0-node2 at 0.005 GB/s next to a CPU-starved healthy pair at 0.035 was judged fine). A round of
one pair falls back to the median of all the other pairs: with 3 hosts every round is one pair and a slow host is
in 2 of the 3, so a median over all of them, its own included, is the slow figure and nothing is below it. A host
is slow when it is low in every pair it is in (each host against its own pairs); it is named with an ``exclude:``
line as ``bisect --hosts`` prints. How sure: how many of its pairs were slow, and how many pairs without it were
slow too (none: the host explains every slow pair). A slow pair whose two hosts are fine elsewhere is a slow link,
named as the pair, unless a reading of it again was fine (``bisect --hosts`` measures such a pair twice).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Optional, Sequence

DEFAULT_TOLERANCE = 0.25


@dataclass(frozen=True)
class PairFigure:
    round: int
    a: str
    b: str
    value: float  # higher is better (GB/s)


@dataclass(frozen=True)
class PairVerdict:
    figure: PairFigure
    reference: float  # the median it was judged against
    slow: bool

    @property
    def ratio(self) -> float:
        return self.figure.value / self.reference if self.reference > 0 else 0.0


@dataclass(frozen=True)
class HostVerdict:
    host: str
    pairs: int
    slow_pairs: int
    median_ratio: float  # median of its pairs' value/reference
    slow: bool
    certainty: str  # "sure", "likely", "cannot tell" (with why)


def exclude_line(hosts: Sequence[str]) -> str:
    """The hosts to leave out, as one ``exclude: h1,h2`` line (Slurm's --exclude); said plainly when there are none."""
    return "exclude: " + ",".join(hosts) if hosts else "no host to exclude"


@dataclass
class PairsJudgement:
    pairs: list[PairVerdict]
    hosts: list[HostVerdict]
    slow_links: list[tuple[str, str]] = field(default_factory=list)  # slow pairs no slow host explains
    cleared_links: list[tuple[str, str]] = field(default_factory=list)  # slow once, fine when measured again

    @property
    def slow_hosts(self) -> list[str]:
        return [h.host for h in self.hosts if h.slow]

    @property
    def exclude_line(self) -> str:
        return exclude_line(self.slow_hosts)

    def summary(self) -> str:
        if not any(p.slow for p in self.pairs):
            return "no slow pair: every pair within tolerance of its round's other pairs"
        parts = [f"slow host {h.host}: {h.slow_pairs} of {h.pairs} of its pairs slow, median "
                 f"{h.median_ratio:.2f}x of its rounds ({h.certainty})" for h in self.hosts if h.slow]
        parts += [f"slow link {a}-{b}: its hosts are fine in their other pairs" for a, b in self.slow_links]
        undecided = [h for h in self.hosts if not h.slow and h.certainty.startswith("cannot")]
        parts += [f"{h.host}: {h.certainty}" for h in undecided]
        parts += [f"{a}-{b} slow once, fine when measured again" for a, b in self.cleared_links]
        return "; ".join(parts)


def judge_pairs(figures: Sequence[PairFigure], tolerance: float = DEFAULT_TOLERANCE) -> PairsJudgement:
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance {tolerance!r}: allowed 0 < tolerance < 1")
    verdicts = []
    for i, f in enumerate(figures):
        others = [g.value for j, g in enumerate(figures) if j != i]
        peers = [g.value for j, g in enumerate(figures) if j != i and g.round == f.round] or others
        reference = statistics.median(peers) if peers else f.value
        verdicts.append(PairVerdict(f, reference, f.value < (1 - tolerance) * reference))
    hosts = list(dict.fromkeys(h for f in figures for h in (f.a, f.b)))
    host_verdicts = [_judge_host(h, verdicts) for h in hosts]
    slow = {h.host for h in host_verdicts if h.slow}
    # a pair measured again is a slow link only if every reading was slow: one slow reading of a healthy pair
    # happens on a loaded box (CI: a veth pair 4x below its round, 0.56x on its recheck)
    fine = {frozenset((v.figure.a, v.figure.b)) for v in verdicts if not v.slow}
    links = list(dict.fromkeys((v.figure.a, v.figure.b) for v in verdicts
                               if v.slow and v.figure.a not in slow and v.figure.b not in slow))
    return PairsJudgement(verdicts, host_verdicts, [link for link in links if frozenset(link) not in fine],
                          [link for link in links if frozenset(link) in fine])


def _judge_host(host: str, verdicts: Sequence[PairVerdict]) -> HostVerdict:
    mine = [v for v in verdicts if host in (v.figure.a, v.figure.b)]
    others = [v for v in verdicts if host not in (v.figure.a, v.figure.b)]
    slow_mine = sum(v.slow for v in mine)
    ratio = statistics.median(v.ratio for v in mine) if mine else 1.0
    is_slow = bool(mine) and slow_mine == len(mine)
    certainty = _certainty(is_slow, len(mine), slow_mine, others)
    return HostVerdict(host, len(mine), slow_mine, ratio, is_slow and len(mine) > 1, certainty)


def _certainty(all_slow: bool, pairs: int, slow: int, others: Sequence[PairVerdict]) -> str:
    slow_others = sum(v.slow for v in others)
    if all_slow and pairs < 2:
        return "cannot tell: its only pair is slow, and a pair has two hosts"
    if not all_slow:
        return f"fine in {pairs - slow} of {pairs} pairs" if slow else "fine"
    if slow_others == 0:
        return f"sure: all {pairs} of its pairs slow, none of the {len(others)} pairs without it"
    return f"likely: all {pairs} of its pairs slow, and {slow_others} of the {len(others)} pairs without it too"


def slowest_first(verdicts: Sequence[PairVerdict]) -> list[PairVerdict]:
    return sorted(verdicts, key=lambda v: v.ratio)


def flag_below_class(values: dict[tuple[int, int], float], classes: dict[tuple[int, int], str],
                     tolerance: float = DEFAULT_TOLERANCE) -> dict[tuple[int, int], Optional[float]]:
    """GPU pairs: each ordered pair's value against the median of its link class (NV#, PIX, SYS...); the pairs more
    than ``tolerance`` below it -> their ratio to that median, the others -> None."""
    medians: dict[str, float] = {}
    for cls in set(classes.values()):
        vals = [v for p, v in values.items() if classes.get(p) == cls]
        if vals:
            medians[cls] = statistics.median(vals)
    out: dict[tuple[int, int], Optional[float]] = {}
    for pair, value in values.items():
        ref = medians.get(classes.get(pair, ""), 0.0)
        out[pair] = (value / ref) if ref > 0 and value < (1 - tolerance) * ref else None
    return out
