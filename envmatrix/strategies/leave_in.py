"""``kind: leave_in``: the base without some variables, plus back each subset of them."""

from __future__ import annotations

from typing import Any, Mapping

from envmatrix.env.atoms import Setup
from envmatrix.strategies._subsets import check_names, parse_subsets
from envmatrix.strategies.base import Strategy, StrategyContext, register


@register
class LeaveInStrategy(Strategy):
    """``{kind: leave_in, base: NAME, vars: [VAR, ...], sizes: [1, 2], labels: {VAR: a}}``.

    Every setup is the base minus all atoms of ``vars``, plus back the atoms of
    one subset of them (in the base's order), named ``<base>+<labels>``
    (``0+a``, ``0+ab``; size 0 is ``<base>+none``). ``sizes`` defaults to
    1..len(vars)-1 (``[0]`` for a single variable); 0 is allowed.
    """

    kind = "leave_in"
    keys = ("base", "vars", "sizes", "labels")
    required = ("base", "vars")

    def generate(self, spec: Mapping[str, Any], ctx: StrategyContext) -> list[Setup]:
        self.check_spec(spec, ctx.where)
        raw_vars = spec.get("vars")
        n = len(raw_vars) if isinstance(raw_vars, (list, tuple)) else 0
        default = list(range(1, n)) if n > 1 else [0]
        sub = parse_subsets(spec, ctx, min_size=0, default_sizes=default)
        varied = set(sub.vars)
        return check_names(sub.setups(self.kind, "+", "kept", lambda kept: varied - kept), ctx.where)
