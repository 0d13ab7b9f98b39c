"""Cheap fidelity first (``search.screen``): measure each trial at a cheaper bench, and at the full one only if promising.

A trial is first measured with the probe's bench cut to ``max_bytes`` (sizes above it dropped) and ``iters`` timed
iterations; the objective reads the largest size that bench measured. The trial goes on to the full bench only when
that cheap value is at least ``keep`` of the best cheap value the study holds (the default env's included); else it
stops there: told PRUNED with ``screened=True``, it counts toward ``search.trials``, is never confirmed or exported,
and its row reaches the samplers with an estimate of its full value (the cheap value times the median full/cheap
ratio of the rows measured at both), so a slow region is not mistaken for a failing one.

Screening pays only where the timed part of a probe dominates its launch, NCCL init and teardown (large sizes, slow or
rate-limited links); on the recorded H200 box a cheap probe cost 81-95% of a full one (benchmarks/search_scale.md).
So the study measures it: the default env at both fidelities, once per study, right after the baseline, and
screening runs only when the cheap probe took at most ``pays_below`` of the full one's wall time; and it stops for
the rest of the study once too few trials stop at the cheap bench for it to buy trials (:func:`still_pays`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from envmatrix import values
from envmatrix.bench.sizes import format_size, parse_size
from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.search.objective import Objective

MIN_DECISIONS = 20  # screen verdicts before the share that went on can switch the screen off
MIN_GAIN = 1.5  # trials per full probe's cost the screen must buy to stay on
SCREEN_ATTR = "screen"  # trial: {value, fidelity, kept, estimate}; baseline: the cost check (CostCheck.to_json)
SCREENED = "screened"  # trial user attribute of a trial stopped at the cheap fidelity
KEYS = ("max_bytes", "iters", "keep", "pays_below")


@dataclass(frozen=True)
class Screen:
    max_bytes: Optional[int] = None  # the cheap bench's largest size; None: the full bench's sizes
    iters: Optional[int] = None  # the cheap bench's timed iterations; None: the full bench's
    keep: float = 0.7  # go on to the full bench at >= keep x the best cheap value (busbw); time: <= best / keep
    pays_below: float = 0.6  # screen only while a cheap probe takes at most this share of a full one's wall time

    def describe(self) -> str:
        parts = ([f"bench up to {format_size(self.max_bytes)}"] if self.max_bytes else []) + \
                ([f"{self.iters} iterations"] if self.iters else [])
        return f"{', '.join(parts)}; full bench at >= {self.keep:g} of the best cheap value"


def parse_screen(raw: Any, where: str, objectives: int, baseline: bool, bench: Any) -> Optional[Screen]:
    """``search.screen`` (null: off). Refused where it cannot run: a second objective, no baseline (whose two
    measurements decide whether screening pays), a probe without a bench, or a cheap bench no cheaper than the full one."""
    if raw is None or raw is False:
        return None
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: {raw!r} is not a mapping; allowed: {{max_bytes: 16M, iters: 5, keep: 0.7, "
                          "pays_below: 0.6}} (any of them) or null")
    unknown = [str(k) for k in raw if k not in KEYS]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], KEYS)}; allowed: {', '.join(KEYS)}")
    if objectives != 1:
        raise ConfigError(f"{where}: screens by one objective; got {objectives} objectives; allowed: one objective, "
                          "or screen: null")
    if not baseline:
        raise ConfigError(f"{where}: needs search.baseline: true (the default env measured at both fidelities decides "
                          "whether screening pays); allowed: baseline: true, or screen: null")
    if not isinstance(bench, Mapping) or not bench.get("sizes"):
        raise ConfigError(f"{where}: the probe has no bench to make cheaper; allowed: a probe.bench, or screen: null")
    max_bytes = None if raw.get("max_bytes") is None else parse_size(raw["max_bytes"], f"{where}.max_bytes")
    iters = None if raw.get("iters") is None else values.integer(f"{where}.iters", raw["iters"], 1)
    if max_bytes is not None and max_bytes < min(bench["sizes"]):
        raise ConfigError(f"{where}.max_bytes: {format_size(max_bytes)} is below every size probe.bench measures "
                          f"(smallest {format_size(min(bench['sizes']))}); allowed: a size from "
                          f"{format_size(min(bench['sizes']))} up")
    smaller = max_bytes is not None and max_bytes < max(bench["sizes"])
    fewer = iters is not None and iters < int(bench.get("iters") or 0)
    if not (smaller or fewer):
        raise ConfigError(f"{where}: max_bytes {raw.get('max_bytes')!r} and iters {raw.get('iters')!r} make no cheaper "
                          f"bench than probe.bench (up to {format_size(max(bench['sizes']))}, {bench.get('iters')} "
                          "iterations); allowed: a max_bytes below its largest size or fewer iters")
    keep = values.number(f"{where}.keep", raw.get("keep", 0.7), above=0, maximum=1)
    pays_below = values.number(f"{where}.pays_below", raw.get("pays_below", 0.6), above=0, maximum=1)
    return Screen(max_bytes, iters, keep, pays_below)


def cheap_bench(bench: Mapping[str, Any], screen: Screen) -> dict[str, Any]:
    """The probe's bench block at the cheap fidelity: the sizes up to ``max_bytes``, ``iters`` timed iterations."""
    out = dict(bench)
    if screen.max_bytes is not None:
        out["sizes"] = [s for s in bench["sizes"] if s <= screen.max_bytes]
        out["max_bytes"] = max(out["sizes"])
    if screen.iters is not None:
        out["iters"] = screen.iters
    return out


def cheap_objective(objective: Objective) -> Objective:
    """The objective at the cheap fidelity: the same collectives, metric, direction and per-collective weights, read at
    the largest size the cheap bench measured (weights of sizes the cheap bench does not reach weigh nothing there)."""
    return Objective(f"{objective.name} (screen)", objective.collectives, (None,), objective.metric, objective.direction,
                     tuple((k, w) for k, w in objective.weights if k in objective.collectives), objective.grids)


def goodness(value: float, direction: str) -> float:
    """Higher is better, whatever the direction (busbw as is, time inverted)."""
    return value if direction == "maximize" else 1.0 / value


def goes_on(cheap: float, best_cheap: Optional[float], keep: float, direction: str) -> bool:
    """Whether a trial whose cheap value is ``cheap`` is measured at the full fidelity."""
    return best_cheap is None or goodness(cheap, direction) >= keep * goodness(best_cheap, direction)


def trial_cost(ratio: float, kept: int, stopped: int) -> float:
    """What a screened trial costs in full probes: ``ratio`` (the cost check's cheap/full) for its cheap probe plus,
    for the share of trials that went on, a full one."""
    return ratio + kept / (kept + stopped)


def still_pays(ratio: float, kept: int, stopped: int) -> bool:
    """Whether the screen still buys trials: below MIN_GAIN trials per full probe's cost the cheap probes are
    overhead, and each row they misrank is lost, so the study goes on without them (benchmarks/search_scale.md)."""
    return kept + stopped < MIN_DECISIONS or trial_cost(ratio, kept, stopped) <= 1.0 / MIN_GAIN


@dataclass(frozen=True)
class Tally:
    """What a study's screen verdicts say so far, the default env's two measurements (the cost check) included."""

    cheap_values: list[float]
    both: list[tuple[float, float]]  # (cheap, full) of every config measured at both fidelities
    kept: int  # trials that went on to the full bench
    stopped: int  # trials screened
    failed: int  # trials that failed at the cheap bench


def tally(check: CostCheck, records: Iterable[tuple[Mapping[str, Any], Optional[float]]]) -> Tally:
    """``records``: each screened trial's record (its ``screen`` attribute) and its full value where it has one."""
    cheap_values, both, kept, stopped, failed = [], [], 0, 0, 0
    if check.cheap_value is not None and check.full_value is not None:
        cheap_values.append(check.cheap_value)
        both.append((check.cheap_value, check.full_value))
    for record, full in records:
        if record.get("value") is None:
            failed += 1
            continue
        cheap_values.append(record["value"])
        kept, stopped = kept + bool(record["kept"]), stopped + (not record["kept"])
        if full is not None:
            both.append((record["value"], full))
    return Tally(cheap_values, both, kept, stopped, failed)


def best_cheap(cheap_values: Iterable[float], direction: str) -> Optional[float]:
    vals = list(cheap_values)
    return max(vals, key=lambda v: goodness(v, direction)) if vals else None


def estimate(cheap: float, both: Sequence[tuple[float, float]]) -> float:
    """The full value a cheap one stands for: ``cheap`` x the median full/cheap ratio of the rows measured at both."""
    ratios = [full / c for c, full in both if c > 0 and full > 0]
    return cheap * statistics.median(ratios) if ratios else cheap


@dataclass(frozen=True)
class CostCheck:
    """The default env's probe wall time at both fidelities (after the baseline warmed the pool): screen or not."""

    cheap_s: float
    full_s: float
    pays_below: float
    cheap_value: Optional[float] = None
    full_value: Optional[float] = None
    fidelity: str = ""

    @property
    def ratio(self) -> float:
        return self.cheap_s / self.full_s if self.full_s > 0 else 1.0

    @property
    def on(self) -> bool:
        return self.ratio <= self.pays_below

    def line(self) -> str:
        verdict = "on" if self.on else "off"
        return (f"screen {verdict}: a cheap probe ({self.fidelity or 'cheap bench'}) took {self.cheap_s:.2f} s, "
                f"{self.ratio:.2f} of a full one ({self.full_s:.2f} s) on the default env; screening runs at <= "
                f"{self.pays_below:g} (search.screen.pays_below)")

    def to_json(self) -> dict[str, Any]:
        return {"cheap_s": self.cheap_s, "full_s": self.full_s, "pays_below": self.pays_below,
                "cheap_value": self.cheap_value, "full_value": self.full_value, "fidelity": self.fidelity,
                "ratio": self.ratio, "on": self.on}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CostCheck":
        return cls(float(data["cheap_s"]), float(data["full_s"]), float(data["pays_below"]), data.get("cheap_value"),
                   data.get("full_value"), str(data.get("fidelity") or ""))
