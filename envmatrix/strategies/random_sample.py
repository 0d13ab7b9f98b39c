"""``kind: random``: N distinct rows drawn uniformly from the allowed product."""

from __future__ import annotations

import random
from typing import Any, Mapping

from envmatrix.env.atoms import Setup
from envmatrix.errors import ConfigError
from envmatrix.strategies.space import Row, Space, seeded_space
from envmatrix.strategies.base import MAX_SETUPS, Strategy, StrategyContext, int_option, register

#: spaces up to this size are enumerated; larger ones are sampled by rejection
ENUMERATE_LIMIT = 200_000


def sample_rows(space: Space, n: int, seed: int) -> list[Row] | None:
    """``n`` distinct allowed rows in product order (all of them if fewer).

    None when a huge, mostly forbidden space yields too few rows by rejection.
    """
    rng = random.Random(seed)
    if space.size <= ENUMERATE_LIMIT:
        allowed = list(space.rows())
        if n >= len(allowed):
            return allowed
        picked = sorted(rng.sample(range(len(allowed)), n))
        return [allowed[i] for i in picked]
    chosen: set[int] = set()
    tries = 0
    while len(chosen) < n:
        tries += 1
        if tries > 100 * n + 10_000:
            return None
        index = rng.randrange(space.size)
        if index not in chosen and not space.is_forbidden(space.decode(index)):
            chosen.add(index)
    return [space.decode(i) for i in sorted(chosen)]


@register
class RandomStrategy(Strategy):
    """``{kind: random, base: NAME|null, vars: {VAR: [values]|all}, n: N, seed: N, forbid: [...], name: prefix}``.

    Names are ``<prefix>rnd00``, ... in product order; ``seed`` defaults to the run's.
    """

    kind = "random"
    keys = ("base", "vars", "n", "seed", "forbid", "name")
    required = ("vars", "n")

    def generate(self, spec: Mapping[str, Any], ctx: StrategyContext) -> list[Setup]:
        self.check_spec(spec, ctx.where)
        space, seed, prefix = seeded_space(spec, ctx)
        n = int_option(spec, "n", ctx.where, default=1, minimum=1, maximum=MAX_SETUPS)
        rows = sample_rows(space, n, seed)
        if rows is None:
            raise ConfigError(
                f"{ctx.where}.forbid: could not find {n} allowed rows by sampling; "
                "the forbid list excludes almost everything"
            )
        if not rows:
            raise ConfigError(f"{ctx.where}.forbid: every combination is forbidden; no setup is left")
        return [space.setup(row, f"{prefix}rnd{i:02d}", self.kind) for i, row in enumerate(rows)]
