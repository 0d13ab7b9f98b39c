"""``kind: leave_out``: the base minus each subset of some variables (seed 003's (0-a) .. (0-bc))."""

from __future__ import annotations

from typing import Any, Mapping

from envmatrix.env.atoms import Setup
from envmatrix.strategies._subsets import check_names, parse_subsets
from envmatrix.strategies.base import Strategy, StrategyContext, register


@register
class LeaveOutStrategy(Strategy):
    """``{kind: leave_out, base: NAME, vars: [VAR, ...], sizes: [1, 2], labels: {VAR: a}}``.

    For every subset of ``vars`` of each size (sizes ascending, then
    itertools.combinations order) one setup: the base with all atoms of those
    variables removed, named ``<base>-<labels>`` (``0-a``, ``0-ab``, ...).
    ``sizes`` defaults to 1..len(vars)-1 (just 1 for a single variable);
    ``labels`` default to a, b, c, ... in ``vars`` order.
    """

    kind = "leave_out"
    keys = ("base", "vars", "sizes", "labels")
    required = ("base", "vars")

    def generate(self, spec: Mapping[str, Any], ctx: StrategyContext) -> list[Setup]:
        self.check_spec(spec, ctx.where)
        sub = parse_subsets(spec, ctx, min_size=1)
        return check_names(sub.setups(self.kind, "-", "left_out", lambda left_out: left_out), ctx.where)
