"""Objectives: bench rows of a trial (one list per grid) -> one number per objective.

``search.objective`` is one mapping (single objective) or a list of them
(multi-objective, Pareto front). Each mapping::

    {collective: allreduce | [allreduce, alltoall], size: 1M | [64K, 1G] | max,
     metric: busbw | time, weights: {allreduce: 2, 1G: 3, allreduce@1G: 1},
     direction: maximize | minimize, name: ..., grids: [1x4]}

The value is the weighted geometric mean of the metric over every
(grid, collective, size) term; one term is just its metric. A term's weight is
the product of the weights given for its collective, its size and the pair
(default 1). ``size: max`` takes the largest size the probe measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Optional, Sequence

from envmatrix import values
from envmatrix.bench.aggregate import headline_rows
from envmatrix.bench.formulas import COLLECTIVES
from envmatrix.bench.sizes import format_size, measured_bytes, parse_size
from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.planning.grid import parse_grid

METRICS = {"busbw": ("busbw_gbps", "maximize"), "time": ("time_us", "minimize")}
DIRECTIONS = ("maximize", "minimize")
_KEYS = ("name", "collective", "collectives", "size", "sizes", "metric", "weights", "direction", "grids")


class MissingMetric(Exception):
    """The trial passed but its rows lack a term (or the value is not positive)."""


@dataclass(frozen=True)
class Objective:
    name: str
    collectives: tuple[str, ...]
    sizes: tuple[Optional[int], ...]  # None: the largest measured size
    metric: str = "busbw"
    direction: str = "maximize"
    weights: tuple[tuple[str, float], ...] = ()
    grids: tuple[str, ...] = ()  # empty: every grid of the trial

    def weight(self, collective: str, size: int) -> float:
        w = dict(self.weights)
        out = 1.0
        for key in (collective, format_size(size), str(size), f"{collective}@{format_size(size)}", f"{collective}@{size}"):
            out *= w.get(key, 1.0)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "collectives": list(self.collectives),
            "sizes": list(self.sizes),
            "metric": self.metric,
            "direction": self.direction,
            "weights": dict(self.weights),
            "grids": list(self.grids),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Objective":
        return cls(
            name=data["name"],
            collectives=tuple(data["collectives"]),
            sizes=tuple(data["sizes"]),
            metric=data.get("metric", "busbw"),
            direction=data.get("direction", "maximize"),
            weights=tuple(sorted((data.get("weights") or {}).items())),
            grids=tuple(data.get("grids") or ()),
        )


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _weighs_something(key: str, colls: Sequence[str], sizes: Sequence[Optional[int]]) -> bool:
    """``key`` names one of the objective's collectives, one of its sizes, or both as collective@size (any size when
    the objective takes the largest measured one)."""
    coll, at, size = key.rpartition("@")
    if not at:
        if key in colls:
            return True
        coll, size = "", key
    elif coll not in colls:
        return False
    try:
        measured = parse_size(size)
    except ConfigError:
        return False
    return None in sizes or measured in sizes


def parse_objective(raw: Any, where: str, grids: Sequence[str]) -> Objective:
    from envmatrix.bench.formulas import ALL

    raw = {} if raw is None else raw
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping such as {{collective: allreduce, size: 1G}}; got {raw!r}")
    unknown = [str(k) for k in raw if k not in _KEYS]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], _KEYS)}; allowed: {', '.join(_KEYS)}")
    for one, many in (("collective", "collectives"), ("size", "sizes")):
        # both given (e.g. a command-line search.objective={collective: ...} merged over a conf's collectives:), one
        # of them was silently dropped and the study optimised what the user did not ask for
        if one in raw and many in raw:
            raise ConfigError(f"{where}: {one}: {raw[one]!r} and {many}: {raw[many]!r} both given, two answers to one "
                              f"question; allowed: one of them ({one} takes one or a list)")
    colls = [str(c) for c in _listed(raw.get("collectives", raw.get("collective", "allreduce")))]
    for c in colls:
        if c not in ALL:
            raise ConfigError(f"{where}.collective: {c!r} not allowed{did_you_mean(c, ALL)}; allowed: {', '.join(ALL)}")
    sizes: list[Optional[int]] = []
    for s in _listed(raw.get("sizes", raw.get("size", "max"))):
        sizes.append(None if s in ("max", None) else parse_size(s, f"{where}.size"))
    for key, listed in (("collectives", colls), ("sizes", sizes)):
        if not listed:
            raise ConfigError(f"{where}.{key}: [] is empty; allowed: one or more (collective: allreduce, size: 1G or max)")
        values.distinct(f"{where}.{key}", listed, "each once (a repeat would weigh twice in the mean)")
    metric = str(raw.get("metric", "busbw"))
    if metric not in METRICS:
        raise ConfigError(f"{where}.metric: {metric!r} not allowed; allowed: {', '.join(METRICS)}")
    direction = str(raw.get("direction", METRICS[metric][1]))
    if direction not in DIRECTIONS:
        raise ConfigError(f"{where}.direction: {direction!r} not allowed; allowed: {', '.join(DIRECTIONS)}")
    weights = raw.get("weights") or {}
    if not isinstance(weights, Mapping):
        raise ConfigError(f"{where}.weights: expected a mapping (collective, size or collective@size -> weight); got {weights!r}")
    for key, w in weights.items():
        if not isinstance(w, (int, float)) or isinstance(w, bool) or w <= 0:
            raise ConfigError(f"{where}.weights.{key}: {w!r} not allowed; allowed: a number > 0")
        if not _weighs_something(str(key), colls, sizes):  # a typo or an unlisted size weighed nothing, silently
            shown = ", ".join([*colls, *("max" if s is None else format_size(s) for s in sizes)])
            raise ConfigError(f"{where}.weights.{key}: weighs nothing this objective measures; allowed: one of its "
                              f"collectives or sizes ({shown}), or collective@size")
    chosen = tuple(str(g) for g in _listed(raw.get("grids") or []))
    for g in chosen:
        if g not in grids:
            raise ConfigError(f"{where}.grids: {g!r} is not a grid of this search; allowed: {', '.join(grids)}")
    name = raw.get("name") or f"{metric}:" + "+".join(colls) + "@" + "+".join("max" if s is None else format_size(s) for s in sizes)
    return Objective(str(name), tuple(colls), tuple(sizes), metric, direction,
                     tuple(sorted((str(k), float(v)) for k, v in weights.items())), chosen)


def _check_busbw_defined(colls: Sequence[str], grids: Sequence[str], where: str) -> None:
    """busbw = algbw x factor(n), and the factor of allreduce (2(n-1)/n), allgather, reduce_scatter and alltoall
    ((n-1)/n) is 0 on one rank (nccl-tests prints 0 too): every trial would fail with no_metric, so it is refused
    before any runs. The bench runs one process per rank, so a grid's rank count is the bench's."""

    def defined_alone(spec: Any) -> bool:
        return spec.factor is not None and spec.factor(1) > 0 and not spec.needs_peer

    for grid in grids:
        if parse_grid(grid).world != 1:
            continue
        for c in colls:
            spec = COLLECTIVES.get(c)
            if spec is not None and spec.factor is not None and not spec.factor(1) > 0:
                alone = ", ".join(n for n, s in COLLECTIVES.items() if defined_alone(s))
                raise ConfigError(f"{where}.metric: busbw of {c} is 0 on grid {grid} (one rank: busbw = algbw x "
                                  f"{c}'s bus factor, 0 at n=1), so no trial could be ranked; allowed: metric: time, "
                                  f"objective.grids of 2 or more ranks, or a collective whose busbw is algbw ({alone})")


def parse_objectives(raw: Any, where: str, grids: Sequence[str]) -> tuple[Objective, ...]:
    items = list(raw) if isinstance(raw, (list, tuple)) else [raw]
    if not items:
        raise ConfigError(f"{where}: empty list; give one objective mapping or a list of them")
    objectives = tuple(parse_objective(item, f"{where}[{i}]" if len(items) > 1 else where, grids) for i, item in enumerate(items))
    names = [o.name for o in objectives]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: objective names repeat ({', '.join(names)}); give each a distinct name:")
    return objectives


def check_measured(objectives: Sequence[Objective], bench: Any, where: str, grids: Sequence[str]) -> None:
    """An objective term the probe's bench never measures, or measures as 0, is refused before any trial: each trial
    would fail with no_metric. A probe without a bench block (a command probe's own output, whose nccl-tests may drive
    several GPUs from one rank) is known only when it runs."""
    if not isinstance(bench, Mapping) or not bench.get("sizes"):
        return
    measured = list(bench.get("collectives") or [])
    largest = max(bench["sizes"])
    for i, objective in enumerate(objectives):
        here = f"{where}[{i}]" if len(objectives) > 1 else where
        if objective.metric == "busbw":
            _check_busbw_defined(objective.collectives, objective.grids or grids, here)
        for collective in objective.collectives:
            if collective not in measured:
                raise ConfigError(f"{here}.collective: {collective!r} is not measured by probe.bench; allowed: "
                                  f"{', '.join(measured)} (or add it to probe.bench.collectives)")
            for size in objective.sizes:
                # nccl-tests' collectives record count x type size, at most the size asked for; the patterns' rows
                # record other sizes (messages x size, both directions together)
                if size is not None and size > largest and collective in COLLECTIVES:
                    raise ConfigError(f"{here}.size: {format_size(size)} is larger than probe.bench measures "
                                      f"({format_size(largest)}); allowed: max or a size up to probe.bench.max_bytes")
                # a size between the bench's steps has no row either: every trial would fail with no_metric
                if size is not None and size not in bench["sizes"] and collective in COLLECTIVES:
                    shown = ", ".join(format_size(s) for s in bench["sizes"])
                    raise ConfigError(f"{here}.size: {format_size(size)} is not a size probe.bench measures; "
                                      f"allowed: max or one of {shown}")


def _measured_at(row: Mapping[str, Any], collective: str, size: int, ranks: int) -> int:
    """The size_bytes of the row that measured the swept ``size``: nccl-tests' aligned count (reduce_scatter at 10K on
    3 ranks: 10236 B), as asked for in another dtype's row (a command probe's nccl-tests); the patterns' rows record
    other sizes (messages x size), as the objective names them."""
    return measured_bytes(collective, size, row.get("dtype"), ranks) if collective in COLLECTIVES else size


def _row(rows: Sequence[Mapping[str, Any]], collective: str, size: Optional[int],
         ranks: int) -> Optional[Mapping[str, Any]]:
    mine = [r for r in headline_rows(rows) if r.get("collective") == collective]
    if size is None:
        largest = max((int(r["size_bytes"]) for r in mine), default=None)
        return next((r for r in mine if int(r["size_bytes"]) == largest), None)
    return next((r for r in mine if int(r.get("size_bytes", -1)) == _measured_at(r, collective, size, ranks)), None)


def terms(objective: Objective,
          metrics: Mapping[str, Sequence[Mapping[str, Any]]]) -> Iterator[tuple[str, int, Mapping[str, Any]]]:
    """(grid, size, bench row) of every term the objective reads, ``size`` as the objective names it (the row's own
    for ``max``), so weights of ``10K`` apply to the 10236 B row measured for it; raises MissingMetric for a term with
    no row. ``metrics`` is keyed by grid label (1x3), whose rank count aligns the sizes."""
    for grid, rows in metrics.items():
        if objective.grids and grid not in objective.grids:
            continue
        ranks = parse_grid(grid).world
        for collective in objective.collectives:
            for size in objective.sizes:
                row = _row(rows, collective, size, ranks)
                if row is None:
                    raise MissingMetric(f"no {collective} row at {'max size' if size is None else format_size(size)} on {grid}")
                yield grid, int(row["size_bytes"]) if size is None else size, row


def evaluate(objective: Objective, metrics: Mapping[str, Sequence[Mapping[str, Any]]]) -> float:
    """Weighted geometric mean over (grid, collective, size); raises MissingMetric."""
    key = METRICS[objective.metric][0]
    total_w, acc = 0.0, 0.0
    for grid, size, row in terms(objective, metrics):
        value = row.get(key)
        if value is None or not value > 0:
            raise MissingMetric(f"{row['collective']} at {format_size(int(row['size_bytes']))} on {grid}: {key} is {value!r}")
        w = objective.weight(str(row["collective"]), size)
        total_w += w
        acc += w * math.log(float(value))
    if not total_w:
        raise MissingMetric(f"objective {objective.name}: no term applies to grids {', '.join(metrics)}")
    return math.exp(acc / total_w)


def compact_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """{collective: {size_bytes: busbw}} of the headline rows (out-of-place where measured): small enough for trial
    attributes."""
    out: dict[str, dict[str, float]] = {}
    for r in headline_rows(rows):
        if r.get("busbw_gbps") is None:
            continue
        out.setdefault(str(r["collective"]), {})[str(int(r["size_bytes"]))] = round(float(r["busbw_gbps"]), 4)
    return out


@dataclass
class EvalOutcome:
    """What one trial's evaluation says: values, or a failure class and root-cause line."""

    values: Optional[list[float]] = None
    failure_class: Optional[str] = None
    root_cause: Optional[str] = None
    attrs: dict[str, Any] = field(default_factory=dict)
    screened: bool = False  # stopped at search.screen's cheap fidelity: no values, and no failure either

    @property
    def failed(self) -> bool:
        return self.values is None and not self.screened
