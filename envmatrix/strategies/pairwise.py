"""``kind: pairwise``: a t-way covering array built with covertable (3.2.0).

covertable's greedy generator takes declarative constraints; each ``forbid``
entry becomes ``not (A == a and B == b ...)``, evaluated under Kleene logic on
partial rows, so forbidden combinations never appear. The result is checked
here afterwards: every t-way combination that fits in some allowed row must be
covered, and any that covertable's heuristic left out (its ``make`` does not
raise on uncovered pairs) is added with one more completed row.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

from envmatrix.env.atoms import Setup
from envmatrix.errors import ConfigError
from envmatrix.strategies.space import Row, Space, seeded_space
from envmatrix.strategies.base import Strategy, StrategyContext, int_option, register


def _constraints(space: Space) -> list[dict[str, Any]]:
    # Factors are given as a list, so fields are the integer variable indices:
    # covertable resolves string fields with dot-notation, which integer keys avoid.
    return [
        {
            "operator": "not",
            "condition": {
                "operator": "and",
                "conditions": [{"operator": "eq", "left": k, "value": v} for k, v in entry],
            },
        }
        for entry in space.forbid
    ]


def tuples_of(row: Row, strength: int) -> set[tuple[tuple[int, int], ...]]:
    """The t-way (var index, value index) combinations a row covers."""
    return {tuple((k, row[k]) for k in ks) for ks in itertools.combinations(range(len(row)), strength)}


def covering_rows(space: Space, strength: int, seed: int) -> list[Row]:
    """A deterministic covering array of ``space`` (value-index rows)."""
    n = len(space.vars)
    if strength >= n:
        # covertable yields nothing when strength > number of factors; the
        # full product is the only t-way covering array anyway.
        return list(space.rows())

    from covertable import make

    raw = make(
        [list(range(len(vals))) for vals in space.values],
        strength=strength,
        salt=str(seed),
        constraints=_constraints(space) or None,
    )
    rows: list[Row] = []
    seen: set[Row] = set()
    for r in raw:
        row = tuple(int(x) for x in r)
        if row in seen or space.is_forbidden(row):  # defensive: never emit a forbidden row
            continue
        seen.add(row)
        rows.append(row)

    covered: set[tuple[tuple[int, int], ...]] = set()
    for row in rows:
        covered |= tuples_of(row, strength)
    for ks in itertools.combinations(range(n), strength):
        for vs in itertools.product(*(range(len(space.values[k])) for k in ks)):
            combo = tuple(zip(ks, vs))
            if combo in covered:
                continue
            row = space.complete(dict(combo))
            if row is None:  # the combination fits in no allowed row
                continue
            rows.append(row)
            covered |= tuples_of(row, strength)
    return rows


@register
class PairwiseStrategy(Strategy):
    """``{kind: pairwise, base: NAME|null, vars: {VAR: [values]|all}, strength: 2, forbid: [...], seed: N, name: prefix}``.

    Names are ``<prefix>pw00``, ``pw01``, ... (prefix as for product).
    The array depends only on the spec and the seed (``seed:`` or the run's).
    """

    kind = "pairwise"
    keys = ("base", "vars", "strength", "forbid", "seed", "name")
    required = ("vars",)

    def generate(self, spec: Mapping[str, Any], ctx: StrategyContext) -> list[Setup]:
        self.check_spec(spec, ctx.where)
        space, seed, prefix = seeded_space(spec, ctx)
        strength = int_option(spec, "strength", ctx.where, default=2, minimum=1)
        rows = covering_rows(space, strength, seed)
        if not rows:
            raise ConfigError(f"{ctx.where}.forbid: every combination is forbidden; no setup is left")
        return [space.setup(row, f"{prefix}pw{i:02d}", self.kind) for i, row in enumerate(rows)]
