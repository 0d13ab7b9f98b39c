"""The ``structured`` sampler: implementation choices first, then resource knobs per choice.

NCCL's knobs are of two kinds. Implementation choices (algorithm, protocol,
transport toggles: any variable with fewer than 3 numeric values or a
non-numeric value) change *which* code runs, and the best resource setting
depends on them; resource knobs (channels, threads, buffer and chunk sizes:
3 or more numeric values) are ordered and usually unimodal in log scale.
AutoCCL (NSDI'25) exploits exactly this, and model-based samplers (TPE, GP)
spend a fifth of a small space before they see it.

The plan is a pure function of what the study has measured (:func:`next_row`),
so resuming, several workers and the Optuna storage all keep working:

1. Screen the choices. When their product is small (at most an eighth of the
   space) every choice is measured once with the knobs at their anchor (NCCL's
   default where "unset" is a value, else the middle of the ordered values);
   otherwise only the anchor is measured and step 2 treats every variable alike.
2. Descend per choice, best-screened choice first: from the best point of that
   choice, measure the unmeasured neighbours (a knob one step up or down in its
   sorted order, which for powers of two is one step in log scale; from
   "unset" every value; in the large-product case also every other value of
   one choice variable, two-valued toggles first; then two knobs one step
   each, since knobs that trade against each other form diagonal ridges); move when one is better, go to the next choice when
   the point is a local optimum. Once the best choice is at its optimum, its
   knob setting is first tried on every other choice (a second screen, fairer
   to choices whose best knobs are far from the anchor).
3. Expand: the unmeasured rows nearest to the best point (ordered distance for
   knobs, 1 per differing choice), so a long search degrades to exhaustion.

Optuna stays the study of record: this is an ordinary ``BaseSampler`` used with
ask/tell, so storage, dashboard and importances see every trial.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

Row = tuple[int, ...]
Score = Optional[float]  # None: failed or forbidden (worse than any measured value)
EXPAND_LIMIT = 20_000  # rows step 3 ranks per proposal


def _numeric(value: Optional[str]) -> Optional[float]:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Layout:
    """Which variables are knobs, their order, and the anchor point; built from the value lists only."""

    sizes: tuple[int, ...]
    ordered: tuple[bool, ...]
    #: per ordered variable: value indices of the numeric values, ascending (unset excluded)
    order: tuple[tuple[int, ...], ...]
    unset: tuple[Optional[int], ...]  # index of the None value, if any
    anchor: Row

    @classmethod
    def of(cls, values: Sequence[Sequence[Optional[str]]]) -> "Layout":
        ordered, order, unset, anchor = [], [], [], []
        for vals in values:
            nums = [(_numeric(v), i) for i, v in enumerate(vals) if v is not None]
            is_knob = len(nums) >= 3 and all(n is not None for n, _ in nums)
            none_at = next((i for i, v in enumerate(vals) if v is None), None)
            ordered.append(is_knob)
            seq = tuple(i for _, i in sorted(nums)) if is_knob else ()
            order.append(seq)
            unset.append(none_at)
            if none_at is not None:
                anchor.append(none_at)  # NCCL's own choice is the natural start
            elif is_knob:
                anchor.append(seq[(len(seq) - 1) // 2])
            else:
                anchor.append(0)
        return cls(tuple(len(v) for v in values), tuple(ordered), tuple(order), tuple(unset), tuple(anchor))

    @property
    def choice_vars(self) -> list[int]:
        return [k for k, o in enumerate(self.ordered) if not o]

    @property
    def knob_vars(self) -> list[int]:
        return [k for k, o in enumerate(self.ordered) if o]

    @property
    def size(self) -> int:
        return math.prod(self.sizes)

    def small_choices(self) -> bool:
        n_choices = math.prod(self.sizes[k] for k in self.choice_vars)
        return n_choices <= max(3, self.size // 8)

    def knob_steps(self, row: Row, k: int) -> list[int]:
        """Value indices one step from ``row[k]`` (from unset: every value; from a value: +-1 and unset)."""
        cur, seq = row[k], self.order[k]
        if cur == self.unset[k]:
            return list(seq)
        pos = seq.index(cur)
        out = [seq[p] for p in (pos + 1, pos - 1) if 0 <= p < len(seq)]
        if self.unset[k] is not None:
            out.append(self.unset[k])
        return out

    def distance(self, a: Row, b: Row) -> float:
        d = 0.0
        for k, (x, y) in enumerate(zip(a, b)):
            if x == y:
                continue
            if self.ordered[k] and x != self.unset[k] and y != self.unset[k]:
                d += abs(self.order[k].index(x) - self.order[k].index(y))
            else:
                d += 1.0
        return d


def _with(row: Row, k: int, v: int) -> Row:
    return row[:k] + (v,) + row[k + 1:]


def next_row(layout: Layout, measured: Mapping[Row, Score], pending: Iterable[Row] = (),
             forbidden: Callable[[Row], bool] = lambda r: False, seed: int = 0) -> Optional[Row]:
    """The next row to measure (higher scores are better), or None when every allowed row is taken."""
    taken = set(measured) | set(pending)

    def fresh(row: Row) -> bool:
        return row not in taken and not forbidden(row)

    def score(row: Row) -> float:
        s = measured.get(row)
        return -math.inf if s is None else s

    choices, knobs = layout.choice_vars, layout.knob_vars
    small = layout.small_choices()
    # 1. screen the implementation choices around the anchor
    if small:
        for combo in itertools.product(*(range(layout.sizes[k]) for k in choices)):
            row = list(layout.anchor)
            for k, v in zip(choices, combo):
                row[k] = v
            if fresh(tuple(row)):
                return tuple(row)
    elif fresh(layout.anchor):
        return layout.anchor  # too many choices to screen: coordinate descent over everything from the anchor
    # 2. descend per choice, best choice first
    good = [r for r in measured if measured[r] is not None]
    if good:
        best_of: dict[tuple, Row] = {}
        for r in good:
            key = tuple(r[k] for k in choices) if small else ()
            if key not in best_of or score(r) > score(best_of[key]):
                best_of[key] = r
        ranked = [cur for _, cur in sorted(best_of.items(), key=lambda kv: -score(kv[1]))]

        def neighbours(cur: Row) -> Iterable[Row]:
            if not small:  # toggles first: one probe each
                for k in sorted(choices, key=lambda k: layout.sizes[k]):
                    for v in range(layout.sizes[k]):
                        yield _with(cur, k, v)
            for k in knobs:
                for v in layout.knob_steps(cur, k):
                    yield _with(cur, k, v)
            # knobs that trade against each other (channels x threads, channels x buffer) form diagonal
            # ridges on which every one-knob step is downhill
            for i, k in enumerate(knobs):
                for j in knobs[i + 1:]:
                    for v in layout.knob_steps(cur, k):
                        for w in layout.knob_steps(cur, j):
                            yield _with(_with(cur, k, v), j, w)

        for row in neighbours(ranked[0]):
            if fresh(row):
                return row
        if small:  # the best choice's knobs, tried on every other choice: a second, fairer screen
            for cur in ranked[1:]:
                row = tuple(cur[k] if k in choices else ranked[0][k] for k in range(len(cur)))
                if fresh(row):
                    return row
        for cur in ranked[1:]:
            for row in neighbours(cur):
                if fresh(row):
                    return row
    # 3. expand around the best point
    centre = max(good, key=score) if good else layout.anchor
    rng = random.Random(seed)
    if layout.size > EXPAND_LIMIT:  # a huge space: nearest of a random sample, not of every row
        rest = [r for r in (tuple(rng.randrange(n) for n in layout.sizes) for _ in range(EXPAND_LIMIT)) if fresh(r)]
    else:
        rest = [r for r in itertools.product(*(range(n) for n in layout.sizes)) if fresh(r)]
    if not rest:
        return None
    return min(rest, key=lambda r: (layout.distance(r, centre), rng.random()))


def make_structured_sampler(values: Sequence[Sequence[Optional[str]]], names: Sequence[str],
                            forbidden: Callable[[Row], bool], seed: int) -> Any:
    """An Optuna sampler that proposes :func:`next_row` for objective 0 of the study (failed and forbidden trials
    are measured rows with no score)."""
    layout = Layout.of(values)

    def plan(measured: dict[Row, Score], pending: list[Row], failed: set[Row], number: int) -> Optional[Row]:
        # seeded by the rows taken, not the trial number: a killed worker's lost trial and its retry take two
        # numbers for one row, and a resumed study must expand as an uninterrupted one does
        return next_row(layout, measured, pending, forbidden, seed + len(set(measured) | set(pending)))

    return make_plan_sampler("StructuredSampler", values, names, seed, plan, pruned_teaches=True)


# measured rows (trial order; None: failed or, where it teaches, forbidden), pending rows, failed rows, trial number
Plan = Callable[[dict[Row, Score], list[Row], set[Row], int], Optional[Row]]


def make_plan_sampler(name: str, values: Sequence[Sequence[Optional[str]]], names: Sequence[str], seed: int,
                      plan: Plan, pruned_teaches: bool) -> Any:
    """An Optuna ``BaseSampler`` (class ``name``) that replays the study's trials into rows and proposes ``plan``'s
    row, one row per trial (every parameter of the trial from it); Optuna's random sampler where the plan has none.
    ``pruned_teaches``: a PRUNED (forbidden) trial counts as a measured row without a score; a screened one
    (search.screen) always counts, scored by its estimated full value."""
    import optuna
    from optuna.trial import TrialState

    from envmatrix.search.screen import SCREEN_ATTR, SCREENED
    from envmatrix.search.study import WORKER_LOST

    index = {n: k for k, n in enumerate(names)}

    def row_of(params: Mapping[str, Any]) -> Optional[Row]:
        try:
            return tuple(list(values[index[n]]).index(params[n]) for n in names)
        except (KeyError, ValueError):  # a variable missing, or a value this space does not hold
            return None

    def rows_of(study: Any, trial: Any) -> tuple[dict[Row, Score], list[Row], set[Row], list[int]]:
        """Measured, pending and failed rows, and the numbers of earlier trials in flight whose row is not stored
        yet (a peer asked just before us: Optuna writes a trial's params one suggest at a time)."""
        sign = 1.0 if study.directions[0] == optuna.study.StudyDirection.MAXIMIZE else -1.0
        measured: dict[Row, Score] = {}
        failed: set[Row] = set()
        pending: list[Row] = []
        unplaced: list[int] = []
        for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
            if t.number == trial.number:
                continue
            if len(t.params) != len(names):
                # a queued retry (or one taken, its params not yet written) has its row in Optuna's fixed_params
                queued = row_of(t.system_attrs.get("fixed_params") or {})
                if t.state in (TrialState.RUNNING, TrialState.WAITING) and queued is not None:
                    pending.append(queued)
                elif t.number < trial.number and t.state == TrialState.RUNNING:
                    unplaced.append(t.number)
                continue
            row = row_of(t.params)
            if row is None:
                continue
            if t.state == TrialState.FAIL and t.user_attrs.get("failure_class") == WORKER_LOST:
                pending.append(row)  # its worker died, not its config; its retry is queued (or about to be)
                continue
            if t.state == TrialState.PRUNED and t.user_attrs.get(SCREENED):
                # stopped at the cheap fidelity: a slow row, not a failing one; its estimated full value ranks it
                s = sign * t.user_attrs[SCREEN_ATTR]["estimate"]
                if measured.get(row) is None or s > measured[row]:
                    measured[row] = s
            elif t.state == TrialState.COMPLETE:
                s = sign * t.values[0]
                if measured.get(row) is None or s > measured[row]:
                    measured[row] = s
            elif t.state == TrialState.FAIL or (t.state == TrialState.PRUNED and pruned_teaches):
                if t.state == TrialState.FAIL:
                    failed.add(row)
                measured.setdefault(row, None)
            elif t.state in (TrialState.RUNNING, TrialState.WAITING):
                pending.append(row)
        return measured, pending, failed, unplaced

    class _PlanSampler(optuna.samplers.BaseSampler):
        def __init__(self) -> None:
            self._planned: dict[int, Row] = {}
            self._fallback = optuna.samplers.RandomSampler(seed=seed)

        def infer_relative_search_space(self, study: Any, trial: Any) -> dict:
            return {}

        def sample_relative(self, study: Any, trial: Any, search_space: Any) -> dict:
            return {}

        def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: Any) -> Any:
            if trial.number not in self._planned:
                measured, pending, failed, unplaced = rows_of(study, trial)
                for number in unplaced:  # the plan is pure: a peer planning that trial now gets this row, so skip it
                    row = plan(measured, pending, failed, number)
                    if row is not None:
                        pending.append(row)
                row = plan(measured, pending, failed, trial.number)
                if row is None:
                    return self._fallback.sample_independent(study, trial, param_name, param_distribution)
                self._planned = {trial.number: row}
            k = index.get(param_name)
            if k is None:
                return self._fallback.sample_independent(study, trial, param_name, param_distribution)
            return values[k][self._planned[trial.number][k]]

    return type(name, (_PlanSampler,), {})()
