"""Setup generation: explicit setups plus strategies (leave_out, product, pairwise, ...).

``expand_setups`` is the one entry point: it parses the top-level ``setups:``,
runs every ``strategies:`` entry in order (each may name as ``base:`` any setup
defined before it), drops setups whose atoms equal an earlier one's (the first
name wins; later names are kept in its ``meta`` as ``alias``, which :func:`merged_notes`
says and :func:`aliased` resolves) and checks names. A run is keyed on its env, not its name, so two
setups the user wrote by name (``setups:``, ``kind: explicit``) with one env are refused: one of the names would
have no run of its own.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from envmatrix.env.atoms import Setup, unique_names
from envmatrix.errors import ConfigError
from envmatrix.strategies import explicit, leave_in, leave_out, pairwise, product, random_sample  # noqa: F401  (register)
from envmatrix.strategies.base import (
    Strategy,
    StrategyContext,
    ValueSource,
    get_strategy,
    register,
    registered_kinds,
)
from envmatrix.strategies.explicit import parse_setups

__all__ = [
    "Strategy",
    "StrategyContext",
    "ValueSource",
    "expand_setups",
    "get_strategy",
    "register",
    "registered_kinds",
    "setup_key",
    "aliased",
    "merged_notes",
]


def setup_key(setup: Setup) -> tuple:
    """What makes two setups the same env: the atoms, ignoring the order of
    different variables but keeping the order of one variable's path entries."""
    groups: dict[tuple[str, str], list[str]] = {}
    for atom in setup.atoms:
        groups.setdefault((atom.var, atom.op), []).append(atom.value)
    return tuple(sorted((var, op, tuple(vals)) for (var, op), vals in groups.items()))


def _env_text(setup: Setup) -> str:
    text = " ".join(str(a) for a in setup.atoms) or "{}: the inherited env"
    return text if len(text) <= 80 else f"{text[:77]}..."


def _written(source: str, name: str) -> str:
    """Where the user wrote setup ``name``: ``setups.a`` or ``strategies[1].setups.a`` (``kind: explicit``)."""
    return f"{source}.{name}" if source == "setups" else f"{source}.setups.{name}"


def aliased(setups: Sequence[Setup], name: str) -> Setup | None:
    """The setup ``name`` was merged into (a generated setup with an earlier one's env), under ``name``; None when
    ``name`` is no such alias (``--setup``/``--baseline`` then look the name up among the setups as before)."""
    for setup in setups:
        if ("alias", name) in setup.meta:
            return dataclasses.replace(setup, name=name, meta=())
    return None


def merged_notes(setups: Sequence[Setup]) -> list[str]:
    """One line per setup that runs for others with its env: the names a plan, matrix and JUnit do not show."""
    out = []
    for setup in setups:
        names = [value for key, value in setup.meta if key == "alias"]
        if names:
            out.append(f"setup{'s' if len(names) > 1 else ''} {', '.join(names)} ha{'ve' if len(names) > 1 else 's'} "
                       f"the env of {setup.name}: run once, as {setup.name}")
    return out


def expand_setups(
    explicit: Mapping[str, Mapping] | None,
    strategies: Sequence[Mapping] | None,
    values: ValueSource,
    seed: int = 0,
    where: str = "config",
) -> list[Setup]:
    """All setups of a config, in order: explicit ones, then each strategy's."""
    out: list[Setup] = []
    by_key: dict[tuple, int] = {}
    named: dict[str, Setup] = {}
    made_by: dict[str, str] = {}  # name -> the config entry that made it, for a clash's message
    written: dict[str, str] = {}  # a setup the user wrote by name -> where: setups.a, strategies[1].setups.a

    def add(setups: list[Setup], source: str, hint: str = "") -> None:
        for s in setups:
            named.setdefault(s.name, s)
            key = setup_key(s)
            if key in by_key:
                i = by_key[key]
                kept = out[i]
                if s.name != kept.name and s.origin == "explicit" and kept.name in written:
                    raise ConfigError(
                        f"{where}: {_written(source, s.name)}: the same env as {written[kept.name]} ({_env_text(s)}); "
                        f"a run is keyed on its env, not its name, so {s.name!r} would have no run of its own; "
                        f"allowed: one name per env (remove {s.name!r} or make its env differ)")
                if s.name != kept.name:
                    out[i] = dataclasses.replace(kept, meta=kept.meta + (("alias", s.name),))
                continue
            if s.name in made_by:
                # e.g. two pairwise strategies without name: both make pw00, pw01, ... with different envs
                raise ConfigError(f"{where}: {source}: makes setup {s.name!r}, also made by {made_by[s.name]} with a "
                                  f"different env; setup names must be unique{hint}")
            made_by[s.name] = source
            if s.origin == "explicit":
                written[s.name] = _written(source, s.name)
            by_key[key] = len(out)
            out.append(s)

    add(parse_setups(explicit, f"{where}: setups", origin="explicit"), "setups")

    if strategies is not None:
        if isinstance(strategies, (str, bytes, Mapping)) or not isinstance(strategies, Sequence):
            raise ConfigError(
                f"{where}: strategies: expected a list of mappings with `kind:`; got {type(strategies).__name__}"
            )
        for i, spec in enumerate(strategies):
            swhere = f"{where}: strategies[{i}]"
            if not isinstance(spec, Mapping):
                raise ConfigError(
                    f"{swhere}: expected a mapping with `kind:`; got {type(spec).__name__}; "
                    f"allowed kinds: {', '.join(registered_kinds())}"
                )
            strategy = get_strategy(spec.get("kind"), swhere)
            ctx = StrategyContext(named=dict(named), values=values, seed=seed, where=swhere)
            hint = (" (give this strategy its own prefix, e.g. name: s%d_)" % i if "name" in strategy.keys
                    else " (rename the other setup)")
            add(strategy.generate(spec, ctx), f"strategies[{i}]", hint)

    if not out:
        raise ConfigError(f"{where}: no setups: give `setups:` or `strategies:`")
    try:
        unique_names(out)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return out
