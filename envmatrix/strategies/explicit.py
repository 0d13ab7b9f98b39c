"""``kind: explicit``: named setups, exactly like the top-level ``setups:``."""

from __future__ import annotations

from typing import Any, Mapping

from envmatrix.env.atoms import Setup, atoms_from_mapping
from envmatrix.errors import ConfigError
from envmatrix.strategies.base import Strategy, StrategyContext, register


def parse_setups(raw: Any, where: str, origin: str = "explicit") -> list[Setup]:
    """``{NAME: {VAR: value}}`` -> setups; an empty/null env is the bare baseline.

    ``where`` names the mapping itself, e.g. ``"sweep.yaml: setups"``.
    """
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping NAME: {{VAR: value}}; got {type(raw).__name__}")
    out: list[Setup] = []
    for name, env in raw.items():
        name = str(name)
        if not name:
            raise ConfigError(f"{where}: a setup name must not be empty")
        if env is None:
            env = {}
        if not isinstance(env, Mapping):
            raise ConfigError(
                f"{where}.{name}: expected a mapping VAR: value; got {type(env).__name__} {env!r}"
            )
        out.append(Setup(name=name, atoms=atoms_from_mapping(env, f"{where}.{name}"), origin=origin))
    return out


@register
class ExplicitStrategy(Strategy):
    """``{kind: explicit, setups: {NAME: {VAR: value}}}``."""

    kind = "explicit"
    keys = ("setups",)
    required = ("setups",)

    def generate(self, spec: Mapping[str, Any], ctx: StrategyContext) -> list[Setup]:
        self.check_spec(spec, ctx.where)
        return parse_setups(spec["setups"], f"{ctx.where}.setups", origin="explicit")
