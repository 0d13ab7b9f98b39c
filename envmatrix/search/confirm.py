"""Confirm a search's winner: re-measure the top candidates with interleaved repeats.

One measurement per configuration names a winner by luck when repeats move by
more than the gap to the runner-up (loopback busbw moves +-15% on the box).
So the top ``k`` trials and the default env are measured again in rounds, the
order rotated every round (drift over time hits every candidate alike), and
ranked by their median. The winner "beats the runner-up beyond the spread"
when its worst repeat is better than the runner-up's best. Rounds are added
(up to ``max_repeats``) while the two overlap and the spread is wider than the
gap, i.e. repeats scale with the spread seen. When the confirmed winner's
median is below the default's, the answer is "keep the default".

Pure: :func:`rounds`, :func:`summarize`, :func:`decide` and :func:`confirm`
(which takes the measure function) run no process themselves.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Mapping, Optional, Sequence

DEFAULT = "default"
CONFIRM_ATTR = "confirmation"  # study user attribute: the verdict (to_json)


def rounds(labels: Sequence[Hashable], first: int, count: int) -> list[tuple[int, Hashable]]:
    """(round, label) for rounds ``first .. first+count-1``, each round's order rotated by its number."""
    n = len(labels)
    out = []
    for r in range(first, first + count):
        shift = r % n if n else 0
        out.extend((r, lab) for lab in list(labels[shift:]) + list(labels[:shift]))
    return out


@dataclass(frozen=True)
class Summary:
    label: Hashable
    values: tuple[float, ...]  # successful repeats (sign-adjusted: higher is better)
    failed: int

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("-inf")

    @property
    def low(self) -> float:
        return min(self.values) if self.values else float("-inf")

    @property
    def high(self) -> float:
        return max(self.values) if self.values else float("-inf")

    @property
    def spread(self) -> float:
        """(max - min) / median of the repeats (0 with fewer than two)."""
        if len(self.values) < 2 or not self.median:
            return 0.0
        return (self.high - self.low) / abs(self.median)


def summarize(samples: Mapping[Hashable, Sequence[Optional[float]]], sign: float = 1.0) -> list[Summary]:
    """Per label: the repeats (None = a failed repeat), best median first; a label with a failed repeat ranks last."""
    out = [Summary(lab, tuple(sign * v for v in vals if v is not None), sum(v is None for v in vals))
           for lab, vals in samples.items()]
    return sorted(out, key=lambda s: (s.failed > 0, -s.median))


@dataclass(frozen=True)
class Decision:
    winner: Hashable  # the label to export (DEFAULT when the default is kept)
    ranking: tuple[Summary, ...]
    separated: bool  # winner's worst repeat beats the runner-up's best
    keep_default: bool
    reason: str


def name(label: Hashable) -> str:
    return "the default env" if label == DEFAULT else f"trial {label}"


def decide(summaries: Sequence[Summary], has_default: bool) -> Decision:
    ranking = tuple(summaries)
    top = ranking[0]
    runner = ranking[1] if len(ranking) > 1 else None
    separated = runner is not None and top.failed == 0 and top.low > runner.high
    default = next((s for s in ranking if s.label == DEFAULT), None) if has_default else None
    if default is not None and default.failed == 0 and (top.label == DEFAULT or top.failed or top.median < default.median):
        return Decision(DEFAULT, ranking, separated if top.label == DEFAULT else False, True,
                        "keep the default: no candidate's confirmed median beats the default env's")
    if runner is None:
        return Decision(top.label, ranking, False, False, "only one candidate")
    gap = (top.median - runner.median) / abs(runner.median) if runner.median not in (0, float("-inf")) else float("inf")
    verdict = "beats" if separated else "does not beat"
    return Decision(top.label, ranking, separated, False,
                    f"{name(top.label)} {verdict} the runner-up, {name(runner.label)}, beyond the spread "
                    f"(median gap {gap:+.1%}; spread {top.spread:.1%} vs {runner.spread:.1%})")


def needs_more(summaries: Sequence[Summary]) -> bool:
    """Winner and runner-up overlap and their spread is wider than their median gap."""
    if len(summaries) < 2 or summaries[0].failed or summaries[1].failed:
        return False
    top, runner = summaries[0], summaries[1]
    return top.low <= runner.high and (top.high - top.low + runner.high - runner.low) / 2 > top.median - runner.median


@dataclass
class Confirmation:
    decision: Decision
    samples: dict[Hashable, list[Optional[float]]] = field(default_factory=dict)
    repeats: int = 0


def confirm(labels: Sequence[Hashable], measure: Callable[[int, Hashable], Optional[float]], sign: float = 1.0,
            repeats: int = 3, max_repeats: int = 6) -> Confirmation:
    """Measure ``labels`` (``DEFAULT`` among them for the default env) in interleaved rounds and decide."""
    samples: dict[Hashable, list[Optional[float]]] = {lab: [] for lab in labels}
    done = 0
    count = max(1, repeats)
    while True:
        for r, lab in rounds(labels, done, count):
            samples[lab].append(measure(r, lab))
        done += count
        summaries = summarize(samples, sign)
        if done >= max_repeats or not needs_more(summaries):
            break
        count = 1
    return Confirmation(decide(summaries, DEFAULT in samples), samples, done)


def to_json(c: Confirmation, sign: float = 1.0) -> dict[str, Any]:
    return {
        "winner": c.decision.winner, "keep_default": c.decision.keep_default, "separated": c.decision.separated,
        "reason": c.decision.reason, "repeats": c.repeats,
        "ranking": [{"label": s.label, "median": sign * s.median if s.values else None,
                     "low": sign * (s.low if sign > 0 else s.high) if s.values else None,
                     "high": sign * (s.high if sign > 0 else s.low) if s.values else None,
                     "spread": s.spread, "failed": s.failed, "values": [sign * v for v in s.values]}
                    for s in c.decision.ranking],
    }
