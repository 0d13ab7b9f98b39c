"""A trial's fidelity, and whether a cheaper fidelity ranks configurations as the expensive one does.

The fidelity of a measurement is what its objective read: the (collective, message size) terms and the timed
iterations behind each (``allreduce@256M x20``). Every search trial records it (user attribute ``fidelity``),
so a study that mixes fidelities says so, and ``search.md`` shows it.

A cheaper fidelity (a smaller message size, fewer iterations) is worth measuring first only where it ranks the
configs as the expensive one does: :func:`compare` gives Spearman's rank correlation over the configs measured
at both, and whether the expensive fidelity's best is among the cheap one's best few
(benchmarks/search_scale.md measures both on recorded H200 landscapes and on the scale landscapes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Mapping, Sequence

from envmatrix.bench.sizes import format_size
from envmatrix.search.objective import Objective, terms

FIDELITY_ATTR = "fidelity"
PREDICTS_FROM = 0.8  # rank correlation from which a cheap fidelity counts as predicting the expensive one


def fidelity_of(objective: Objective, metrics: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """``collective@size xITERS`` for every term ``objective`` read, in reading order, repeats once."""
    out: list[str] = []
    for _, _, row in terms(objective, metrics):
        iters = row.get("iters")
        term = f"{row['collective']}@{format_size(int(row['size_bytes']))}" + (f" x{iters}" if iters is not None else "")
        if term not in out:
            out.append(term)
    return ", ".join(out)


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties at their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def rank_correlation(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rho (Pearson's r of the ranks); 0.0 where either side is constant."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"rank_correlation: needs two equally long sequences of 2+ values, got {len(xs)} and {len(ys)}")
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / (sxx * syy) ** 0.5 if sxx and syy else 0.0


@dataclass(frozen=True)
class Comparison:
    configs: int  # measured at both fidelities
    rho: float  # Spearman's rank correlation, cheap vs expensive
    best_rank: int  # the expensive fidelity's best config, ranked by the cheap one (1 = the cheap one's best too)
    regret: float  # 1 - expensive(cheap's best) / expensive's best: what trusting the cheap winner would lose

    @property
    def predicts(self) -> bool:
        return self.rho >= PREDICTS_FROM


def compare(cheap: Mapping[Hashable, float], expensive: Mapping[Hashable, float]) -> Comparison:
    """The cheap fidelity against the expensive one over the configs both measured (higher is better in both)."""
    keys = [k for k in expensive if k in cheap]
    if len(keys) < 2:
        raise ValueError(f"compare: {len(keys)} configs measured at both fidelities; needs 2 or more")
    xs, ys = [cheap[k] for k in keys], [expensive[k] for k in keys]
    best = max(keys, key=lambda k: expensive[k])
    cheap_best = max(keys, key=lambda k: cheap[k])
    return Comparison(len(keys), rank_correlation(xs, ys), 1 + sum(cheap[k] > cheap[best] for k in keys),
                      1.0 - expensive[cheap_best] / expensive[best])
