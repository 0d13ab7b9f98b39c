"""The search space: ``search.space`` / ``search.fixed`` / ``search.forbid`` of a config.

Values and forbidden combinations are parsed by the strategies' shared
:func:`envmatrix.strategies.space.parse_space`, so ``VAR: all``, ``null`` (unset)
and the forbid syntax mean the same as in ``product``/``pairwise``. Every value
is checked against the catalog before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from envmatrix.config.resolve import CatalogValues, check_pinned_atoms
from envmatrix.env.atoms import SET, Atom, Setup, atoms_from_mapping
from envmatrix.errors import ConfigError
from envmatrix.strategies.space import Row, Space, parse_space
from envmatrix.strategies.base import StrategyContext

Choice = Optional[str]


@dataclass(frozen=True)
class SearchSpace:
    """Varied variables (categorical), the fixed base setup, and forbidden rows."""

    space: Space
    fixed: Setup

    @property
    def vars(self) -> tuple[str, ...]:
        return self.space.vars

    def choices(self, var: str) -> tuple[Choice, ...]:
        return self.space.values[self.space.vars.index(var)]

    @property
    def size(self) -> int:
        return self.space.size

    def allowed_rows(self) -> list[Row]:
        return list(self.space.rows())

    def suggest(self, trial: Any) -> Row:
        """Ask ``trial`` (an optuna Trial) for one value per variable; returns value indices."""
        return tuple(
            vals.index(trial.suggest_categorical(var, list(vals)))
            for var, vals in zip(self.space.vars, self.space.values)
        )

    def row_of(self, params: Mapping[str, Any]) -> Optional[Row]:
        """Value indices of a trial's params, None when they do not fit this space."""
        try:
            return tuple(vals.index(params[var]) for var, vals in zip(self.space.vars, self.space.values))
        except (KeyError, ValueError):
            return None

    def params(self, row: Row) -> dict[str, Choice]:
        return dict(self.space.assignment(row))

    def is_forbidden(self, row: Row) -> bool:
        return self.space.is_forbidden(row)

    def setup(self, row: Row) -> Setup:
        """The env of one row: fixed atoms with the varied variables applied, named by its digest."""
        base = self.space.setup(row, name="search", origin="search")
        return Setup(name=f"s{base.digest()[:8]}", atoms=base.atoms, origin="search", meta=base.meta)

    def setup_of_params(self, params: Mapping[str, Any]) -> Setup:
        row = self.row_of(params)
        if row is None:
            raise ConfigError(f"params {dict(params)!r} do not fit the search space over {', '.join(self.vars)}")
        return self.setup(row)

    def to_json(self) -> dict[str, Any]:
        forbid = [{self.space.vars[k]: self.space.values[k][v] for k, v in entry} for entry in self.space.forbid]
        return {
            "space": {var: list(vals) for var, vals in zip(self.space.vars, self.space.values)},
            "fixed": [a.to_json() for a in self.fixed.atoms],
            "forbid": forbid,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SearchSpace":
        fixed = Setup("fixed", tuple(Atom.from_json(a) for a in data.get("fixed", [])), origin="search")
        values = tuple(tuple(v) for v in data["space"].values())
        names = tuple(data["space"])
        forbid = tuple(
            tuple(sorted((names.index(var), values[names.index(var)].index(val)) for var, val in entry.items()))
            for entry in data.get("forbid", [])
        )
        return cls(Space(base=fixed, vars=names, values=values, forbid=forbid), fixed)


def parse_search_space(
    search: Mapping[str, Any],
    catalog: Any,
    pins: Mapping[str, str],
    where: str,
    allow_unknown: bool = False,
) -> SearchSpace:
    """``search.space`` (VAR: [values] | all), ``search.fixed`` (VAR: value), ``search.forbid``."""
    raw = search.get("space")
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(
            f"{where}.space: expected a non-empty mapping VAR: [values] or VAR: all; got {raw!r} "
            "(e.g. search.space: {NCCL_ALGO: [Ring, Tree], NCCL_PROTO: all})"
        )
    fixed_raw = {} if search.get("fixed") is None else search["fixed"]  # `or {}` let 0, false and '' pass as none
    if not isinstance(fixed_raw, Mapping):
        raise ConfigError(f"{where}.fixed: expected a mapping VAR: value; got {fixed_raw!r}")
    fixed = Setup("fixed", atoms_from_mapping(fixed_raw, f"{where}.fixed"), origin="search")
    both = sorted(set(fixed.variables) & {str(v) for v in raw})
    if both:
        raise ConfigError(f"{where}.fixed.{both[0]}: also varied in {where}.space; a variable is either fixed or searched")
    ctx = StrategyContext(named={}, values=CatalogValues(catalog), where=where)
    # a pinned variable in the space is refused by parse_space whatever the caller set; fixed values by the pins
    space = parse_space({"space": dict(raw), "forbid": search.get("forbid")}, fixed, ctx, key="space")
    out = SearchSpace(space, fixed)
    catalog.validate_setup(fixed, where=f"{where}.fixed", allow_unknown=allow_unknown)
    for var, vals in zip(space.vars, space.values):
        for i, val in enumerate(vals):
            if val is not None:
                catalog.validate_atom(Atom(var, SET, val), f"{where}.space.{var}[{i}]", allow_unknown)
    check_pinned_atoms(fixed.atoms, pins, f"{where}.fixed.")
    if not space.size or not any(True for _ in space.rows()):
        raise ConfigError(f"{where}.forbid: forbids every combination of {where}.space; nothing left to search")
    return out


def varied(space: SearchSpace) -> list[str]:
    """Variables with more than one value (the ones importances can rank)."""
    return [v for v, vals in zip(space.vars, space.space.values) if len(vals) > 1]

