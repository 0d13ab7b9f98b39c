"""``kind: product``: every combination of the listed values on top of a base."""

from __future__ import annotations

from typing import Any, Mapping

from envmatrix.env.atoms import Setup
from envmatrix.errors import ConfigError
from envmatrix.strategies.space import parse_space
from envmatrix.strategies.base import MAX_SETUPS, Strategy, StrategyContext, name_prefix, register, resolve_base



@register
class ProductStrategy(Strategy):
    """``{kind: product, base: NAME|null, vars: {VAR: [values]|all}, name: prefix, forbid: [...]}``.

    Names are ``<prefix>VAR1=v1,VAR2=v2`` (``unset`` for null); the prefix
    defaults to ``<base>+`` with a base and to nothing without.
    """

    kind = "product"
    keys = ("base", "vars", "name", "forbid")
    required = ("vars",)

    def generate(self, spec: Mapping[str, Any], ctx: StrategyContext) -> list[Setup]:
        self.check_spec(spec, ctx.where)
        base = resolve_base(spec.get("base"), ctx, required=False)
        space = parse_space(spec, base, ctx)
        if space.size > MAX_SETUPS:
            raise ConfigError(
                f"{ctx.where}.vars: the product has {space.size} setups, more than {MAX_SETUPS}; "
                "use kind pairwise or random for a space this large"
            )
        prefix = name_prefix(spec, base, ctx.where)
        return [space.setup(row, f"{prefix}{space.label(row)}", self.kind) for row in space.rows()]
