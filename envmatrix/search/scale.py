"""The ``scale`` plan: large spaces with failing regions and basins the descent does not see (issue 37).

On a space of tens of thousands of configs the structured descent settles on
the first broad basin it climbs; a narrow better basin that needs three knobs
changed at once is never reached from there (every one- and two-knob step is
downhill). This plan spends its trials as:

1. NCCL's default (every variable unset), then a space-filling exploration
   (:data:`EXPLORE` rows, each the farthest of a few random allowed rows from
   everything measured, a knob never unset there: the default row and the
   climbs cover that), so every basin with some width gets a sample;
2. :data:`ELITE_SAMPLES` rows drawn from the value frequencies of the
   :data:`ELITE` best rows so far, each variable on its own (a univariate
   estimation-of-distribution step, as in the cross-entropy method): a narrow
   basin's best rows share its three values, so drawing them together is far
   likelier than at random (on the scale8 landscapes the best explored rows
   hold two or three of the basin's values about a quarter of the time);
3. multi-start descent: a first-improvement climb (one knob a step, a choice
   to any other value, the steps tried in the order a main-effects model of
   the rows of steps 1-2 ranks them) from the best of those rows, then from
   the others in the order of :func:`start_order` (a row better than its
   values predict first: a narrow basin's rows are), skipping any within
   :data:`NEW_BASIN` of an optimum already found. A later climb first tries
   the best optimum's value of each variable where it differs, most promising
   first (knobs the basin does not depend on are best where the other basin
   has them); a copy that does not gain :data:`COPY_GAIN` marks its variable
   *held*: one the start's basin may depend on, never copied again in this
   climb. Only where the copies end at :data:`PROMISE` of that optimum or
   more come one-knob steps, and while the climb is below the optimum only
   steps that change a held variable, never back to the optimum's value
   there (that is the step into the broad basin the copy already refused),
   and at most :data:`PATIENCE` of them without a gain: a basin's skirt
   climbs to its peak even where that peak is three knobs from the broad
   one, and a start of no promise costs a few probes instead of a
   neighbourhood; a climb that comes within :data:`MERGE` of a better optimum
   stops;
4. two knobs at once around the best row (ridges), then random allowed rows.

Failures are information (:func:`learn_failures`): a failed row marks the
region of each of its variable pairs, exactly and "this value or more" for
ordered knobs (NCCL refuses too many sockets, threads, channels x buffers);
a region that holds two failures, no success and at most :data:`MAX_REGION`
of the space is never proposed again (regions taken greedily, the one that
explains most unexplained failures first).
The plan is a pure function of the measured rows in trial order, so resuming
and several workers keep working, as in :mod:`envmatrix.search.structured`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from envmatrix.search.structured import Layout, Row, Score, _with, make_plan_sampler

# ``structured`` hands spaces of this many configs to this plan: the 120- to 2,016-config landscapes keep the
# descent that exports their optimum (benchmarks/search_landscapes.md); 20k+ need exploration first
SCALE_FROM = 10_000
EXPLORE = 40  # rows of step 1, the default included (benchmarks/search_scale.md: 40 / 60 / 80 / 100, then 20-50 with step 2)
ELITE_SAMPLES = 30  # rows of step 2
ELITE = 8  # best rows whose value frequencies step 2 draws from
PSEUDO_COUNT = 0.1  # per value and variable in step 2: a value no elite row holds is still drawn now and then
NEW_BASIN = 3.0  # a start this far (Layout.distance) from every found optimum opens a new climb
PROMISE = 0.7  # a later climb whose copies of the best optimum's values end below this share of it stops there
MERGE = 2.0  # a climb this close to a better found optimum stops (it is in that optimum's basin)
# a later climb's copy must beat its row by this share to be taken (+-3% noise alone takes none): on a copy that
# only ties, the broad basin takes over a basin row whose other values are still poor (benchmarks/search_scale.md)
COPY_GAIN = 0.03
PATIENCE = 10  # one-knob steps without a gain after which a later climb stops (the first climb checks every one)
RIDGE = 1.0  # ridge penalty of start_order's main-effects model (one-hot values, log busbw)
CANDIDATES = 48  # random rows per exploration proposal
MIN_SUPPORT = 2  # failures a region needs (with no success) before it is avoided
# the largest share of the space a learned region may cover: early on, two failures and no success fit
# "channels set at all" too; a real limit (sockets > 64, a protocol x thread count) is a corner of the space
MAX_REGION = 0.15


@dataclass(frozen=True)
class FailureModel:
    """Learned failing regions: (var i, value, var j, value, monotone) with i <= j."""

    rules: tuple[tuple[int, int, int, int, bool], ...]
    cover: tuple[tuple[tuple[bool, ...], ...], ...]  # cover[k][v][c]: value v is at or above value c of knob k

    def predicts(self, row: Row) -> bool:
        return any(self.holds(row, rule) for rule in self.rules)

    def holds(self, row: Row, rule: tuple[int, int, int, int, bool]) -> bool:
        i, ci, j, cj, mono = rule
        if mono:
            return self.cover[i][row[i]][ci] and self.cover[j][row[j]][cj]
        return row[i] == ci and row[j] == cj

    def describe(self, names: Sequence[str], values: Sequence[Sequence[Optional[str]]]) -> list[str]:
        out = []
        for i, ci, j, cj, mono in self.rules:
            op = ">=" if mono else "="
            terms = [f"{names[i]}{op if mono and values[i][ci] is not None else '='}{values[i][ci] or 'unset'}"]
            if j != i:
                terms.append(f"{names[j]}{op if mono and values[j][cj] is not None else '='}{values[j][cj] or 'unset'}")
            out.append(" and ".join(terms))
        return out


def _cover(layout: Layout) -> tuple[tuple[tuple[bool, ...], ...], ...]:
    out = []
    for k, n in enumerate(layout.sizes):
        rank = {v: p for p, v in enumerate(layout.order[k])} if layout.ordered[k] else {}
        out.append(tuple(tuple(v == c or (v in rank and c in rank and rank[v] >= rank[c]) for c in range(n)) for v in range(n)))
    return tuple(out)


def learn_failures(layout: Layout, ok: Iterable[Row], failed: Iterable[Row]) -> FailureModel:
    """Regions (one variable or a pair; exact, or at-or-above for knobs) with MIN_SUPPORT failures, no success
    and at most MAX_REGION of the space, taken greedily: the region explaining most failures not yet explained
    first, so a failure explained by a real limit does not also support chance regions around it."""
    cover = _cover(layout)
    ok, failed = list(ok), sorted(set(failed))
    if len(failed) < MIN_SUPPORT:
        return FailureModel((), cover)
    n = len(layout.sizes)
    candidates: list[tuple[tuple, frozenset[int], float]] = []
    for i in range(n):
        for j in range(i, n):
            cells_ok = _count(ok, i, j)
            kinds = (False, True) if (layout.ordered[i] or layout.ordered[j]) else (False,)
            for ci, cj in sorted({(f[i], f[j]) for f in failed}):
                for mono in kinds:
                    rule = (i, ci, j, cj, mono)
                    probe = FailureModel((rule,), cover)
                    share = _share(layout, cover, rule)
                    if share > MAX_REGION or any(probe.holds(cell, rule) for cell in _cells(cells_ok, i, j, n)):
                        continue
                    hits = frozenset(k for k, f in enumerate(failed) if probe.holds(f, rule))
                    if len(hits) >= MIN_SUPPORT:
                        candidates.append((rule, hits, share))
    rules, explained = [], set()
    while candidates:
        rule, hits, _ = max(candidates, key=lambda c: (len(c[1] - explained), -c[2], c[0]))
        if len(hits - explained) < MIN_SUPPORT:
            break
        rules.append(rule)
        explained |= hits
        candidates = [c for c in candidates if c[0] != rule]
    return FailureModel(tuple(rules), cover)


def _share(layout: Layout, cover: Any, rule: tuple) -> float:
    """The share of the space a rule's region covers."""
    i, ci, j, cj, mono = rule
    def part(k: int, c: int) -> float:
        return (sum(cover[k][v][c] for v in range(layout.sizes[k])) if mono else 1) / layout.sizes[k]
    return part(i, ci) * (part(j, cj) if j != i else 1.0)


def _cells(counts: dict, i: int, j: int, n: int) -> Iterable[Row]:
    """Sparse rows holding just the (i, j) values of counted cells (enough for a rule on i and j)."""
    for vi, vj in counts:
        row = [0] * n
        row[i], row[j] = vi, vj
        yield tuple(row)


def _count(rows: list[Row], i: int, j: int) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for r in rows:
        out[(r[i], r[j])] = out.get((r[i], r[j]), 0) + 1
    return out


def neighbours(layout: Layout, cur: Row, rng: random.Random, effect: Mapping[tuple[int, int], float]) -> list[Row]:
    """One-knob steps and every other value of a choice, most promising first by ``effect`` (main effects in log
    busbw), ties in a seeded order: first improvement takes the first better, so the order sets where a climb goes."""
    out = []
    for k in range(len(cur)):
        steps = layout.knob_steps(cur, k) if layout.ordered[k] else [v for v in range(layout.sizes[k]) if v != cur[k]]
        out.extend((effect.get((k, v), 0.0) - effect.get((k, cur[k]), 0.0), _with(cur, k, v)) for v in steps)
    rng.shuffle(out)
    out.sort(key=lambda gain_row: -gain_row[0])
    return [row for _, row in out]


def pair_steps(layout: Layout, cur: Row) -> Iterable[Row]:
    knobs = layout.knob_vars
    for i, k in enumerate(knobs):
        for j in knobs[i + 1:]:
            for v in layout.knob_steps(cur, k):
                for w in layout.knob_steps(cur, j):
                    yield _with(_with(cur, k, v), j, w)


def _log_busbw(value: float) -> float:
    """The scale the models fit: busbw ratios add there (a value of 0 floored, not an error)."""
    return math.log(max(value, 1e-12))


def main_effects(rows: Sequence[Row], good: Mapping[Row, float]) -> dict[tuple[int, int], float]:
    """(variable, value) -> mean log busbw of the rows holding it, above the mean of all, shrunk by one pseudo-row
    at the mean (few rows, small effect). Fitted on the rows of steps 1-2 only, so a replayed climb orders its
    steps as it did when it ran."""
    logs = {r: _log_busbw(good[r]) for r in rows}
    if not logs:
        return {}
    mean = sum(logs.values()) / len(logs)
    effect: dict[tuple[int, int], list[float]] = {}
    for r, y in logs.items():
        for k, v in enumerate(r):
            effect.setdefault((k, v), []).append(y - mean)
    return {kv: sum(e) / (len(e) + 1) for kv, e in effect.items()}


def elite_sample(layout: Layout, good: Mapping[Row, float], rng: random.Random, fresh: Callable[[Row], bool]) -> Optional[Row]:
    """A fresh row drawn variable by variable from the value frequencies of the :data:`ELITE` best rows."""
    elite = sorted(good, key=lambda r: -good[r])[:ELITE]
    weights = [[PSEUDO_COUNT + sum(r[k] == v for r in elite) for v in range(n)] for k, n in enumerate(layout.sizes)]
    for _ in range(2_000):
        row = tuple(rng.choices(range(len(w)), weights=w)[0] for w in weights)
        if fresh(row):
            return row
    return None


def _held_step(row: Row, cur: Row, top: Row, held: set[int]) -> bool:
    """A one-knob step of a climb below the best optimum: it changes a held variable, and not to the optimum's value."""
    changed = [k for k in range(len(cur)) if row[k] != cur[k]]
    return any(k in held for k in changed) and not any(k in held and row[k] == top[k] for k in changed)


def start_order(layout: Layout, rows: Sequence[Row], good: Mapping[Row, float]) -> list[Row]:
    """``rows`` as climb starts: the best first (its climb finds the broad optimum), then by log busbw plus its
    leave-one-out residual under a ridge main-effects model. A row of a narrow basin is better than its values
    predict (its value comes from three of them together), so it ranks above broad rows of like value. On the
    scale families (scale8, heldout_d, heldout_e; 40 seeds each) a row whose climb can reach the basin (two of
    its three values, the third one step off) is among the first five starts on 84 of 120 seeds, by value on 65."""
    import numpy as np  # lazily: the plan module stays light to import

    ranked = sorted(rows, key=lambda r: -good[r])
    if len(ranked) < 3:
        return ranked
    y = np.array([_log_busbw(good[r]) for r in ranked])
    cells = [(k, v) for k, n in enumerate(layout.sizes) for v in range(n)]
    x = np.array([[1.0] + [1.0 if r[k] == v else 0.0 for k, v in cells] for r in ranked])
    penalty = np.eye(x.shape[1]) * RIDGE
    penalty[0, 0] = 0.0  # the mean is not shrunk
    hat = x @ np.linalg.solve(x.T @ x + penalty, x.T)
    residual = (y - hat @ y) / np.clip(1.0 - np.diag(hat), 1e-6, None)
    score = {r: y[i] + residual[i] for i, r in enumerate(ranked)}
    return ranked[:1] + sorted(ranked[1:], key=lambda r: -score[r])


def next_row(layout: Layout, measured: Mapping[Row, Score], pending: Iterable[Row] = (),
             forbidden: Callable[[Row], bool] = lambda r: False, seed: int = 0,
             failed: Iterable[Row] = ()) -> Optional[Row]:
    """The next row to measure; ``measured`` in trial order (None: failed), ``failed`` the rows that failed."""
    failed = set(failed) | {r for r, s in measured.items() if s is None}
    good = {r: s for r, s in measured.items() if s is not None}
    model = learn_failures(layout, good, failed)
    taken = set(measured) | set(pending)

    def fresh(row: Row) -> bool:
        return row not in taken and not forbidden(row) and not model.predicts(row)

    rng = random.Random(f"{seed}-{len(taken)}")
    if fresh(layout.anchor):
        return layout.anchor
    explored = list(measured)[:EXPLORE + ELITE_SAMPLES]
    if len(taken) < EXPLORE:
        # a knob's unset is NCCL's own default, which the default row measures and every climb reaches in one step:
        # the space-filling rows spread over the values a user sets (benchmarks/search_scale.md: 145 -> 161 of 290)
        values = [[v for v in range(n) if not layout.ordered[k] or v != layout.unset[k]] for k, n in enumerate(layout.sizes)]
        pool = [r for r in (tuple(rng.choice(v) for v in values) for _ in range(CANDIDATES * 4)) if fresh(r)][:CANDIDATES]
        if pool:
            return max(pool, key=lambda r: min((layout.distance(r, m) for m in taken), default=0.0))
    if len(taken) < EXPLORE + ELITE_SAMPLES and good:
        row = elite_sample(layout, good, rng, fresh)
        if row is not None:
            return row
    # 3. multi-start first-improvement climbs from the best rows of steps 1-2, replayed from what is measured

    optima: list[Row] = []
    sampled = [r for r in explored if r in good]
    effect = main_effects(sampled, good)
    for start in start_order(layout, sampled, good):
        if any(layout.distance(start, o) < NEW_BASIN for o in optima):
            continue
        cur = start
        top = max(optima, key=good.get) if optima else None
        held: set[int] = set()
        while True:
            moved = False
            if top is not None:
                # the copy the main effects expect most from first: a basin row's own values (its trio) come last
                differing = [k for k in range(len(cur)) if cur[k] != top[k] and k not in held]
                for k in sorted(differing, key=lambda k: effect.get((k, cur[k]), 0.0) - effect.get((k, top[k]), 0.0)):
                    row = _with(cur, k, top[k])
                    if fresh(row):
                        return row
                    if good.get(row, float("-inf")) > good[cur] * (1 + COPY_GAIN):
                        cur, moved = row, True
                        break
                    held.add(k)
            if not moved and (top is None or good[cur] >= PROMISE * good[top]):
                free = top is None or good[cur] > good[top]
                steps = neighbours(layout, cur, random.Random(f"{seed}-{cur}"), effect)
                if not free:
                    steps = [r for r in steps if _held_step(r, cur, top, held)]
                idle = 0
                for row in steps:
                    if top is not None and idle >= PATIENCE:
                        break
                    if fresh(row):
                        return row
                    if good.get(row, float("-inf")) > good[cur]:
                        cur, moved = row, True
                        break
                    idle += 1
            # a climb that walked into a basin already climbed ends there: its peak is known
            if not moved or any(layout.distance(cur, o) <= MERGE and good[o] >= good[cur] for o in optima):
                break
        optima.append(cur)
    # 4. ridges around the best row, then anything allowed
    if good:
        best = max(good, key=good.get)
        for row in pair_steps(layout, best):
            if fresh(row):
                return row
    for _ in range(20_000):
        row = tuple(rng.randrange(n) for n in layout.sizes)
        if fresh(row):
            return row
    return None


def make_scale_sampler(values: Sequence[Sequence[Optional[str]]], names: Sequence[str],
                       forbidden: Callable[[Row], bool], seed: int) -> Any:
    """An Optuna sampler proposing :func:`next_row` for objective 0 (failed trials teach the failure model;
    forbidden ones, PRUNED, are known from the space and teach nothing)."""
    layout = Layout.of(values)

    def plan(measured: dict[Row, Score], pending: list[Row], failed: set[Row], number: int) -> Optional[Row]:
        return next_row(layout, measured, pending, forbidden, seed, failed)

    return make_plan_sampler("ScaleSampler", values, names, seed, plan, pruned_teaches=False)
