"""The "vars -> value lists" space shared by product, pairwise and random.

``vars: {VAR: [v1, v2, null] | "all"}`` becomes a :class:`Space`: a base setup,
the variables in spec order and, per variable, its values as strings (``None``
stands for "unset": an ``unset VAR`` atom, as ``VAR: null`` in ``setups:``). ``forbid:`` is a
list of partial assignments that must never appear together in one row.

Rows are tuples of value *indices* (one per variable), which keeps the
combinatorics (covertable, sampling) independent of the value strings.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from envmatrix.env.atoms import SET, UNSET, Atom, Setup, scalar_to_str
from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.strategies.base import StrategyContext, int_option, name_prefix, refuse_pinned, resolve_base
from envmatrix.values import var_name

Row = tuple[int, ...]

#: how ``None`` (unset) shows up in generated names and meta
UNSET_LABEL = "unset"


@dataclass(frozen=True)
class Space:
    base: Setup | None
    vars: tuple[str, ...]
    values: tuple[tuple[str | None, ...], ...]
    #: each forbid entry as ((var index, value index), ...)
    forbid: tuple[tuple[tuple[int, int], ...], ...] = ()

    @property
    def size(self) -> int:
        n = 1
        for vals in self.values:
            n *= len(vals)
        return n

    def is_forbidden(self, row: Mapping[int, int] | Sequence[int]) -> bool:
        """True when a forbid entry is fully assigned in ``row`` and matches.

        ``row`` may be partial (a mapping var index -> value index); an entry
        with an unassigned variable does not match yet.
        """
        get = row.get if isinstance(row, Mapping) else (lambda k: row[k] if k < len(row) else None)
        for entry in self.forbid:
            if all(get(k) == v for k, v in entry):
                return True
        return False

    def rows(self) -> Iterator[Row]:
        """Every allowed row, in product order (first variable slowest)."""
        for row in itertools.product(*(range(len(v)) for v in self.values)):
            if not self.is_forbidden(row):
                yield row

    def decode(self, index: int) -> Row:
        """The ``index``-th row of the full product (forbidden or not)."""
        out = []
        for vals in reversed(self.values):
            index, r = divmod(index, len(vals))
            out.append(r)
        return tuple(reversed(out))

    def complete(self, partial: Mapping[int, int]) -> Row | None:
        """A full allowed row extending ``partial`` (backtracking), or None."""
        free = [k for k in range(len(self.vars)) if k not in partial]
        assign = dict(partial)
        if self.is_forbidden(assign):
            return None

        def walk(i: int) -> bool:
            if i == len(free):
                return True
            k = free[i]
            for v in range(len(self.values[k])):
                assign[k] = v
                if not self.is_forbidden(assign) and walk(i + 1):
                    return True
            del assign[k]
            return False

        if not walk(0):
            return None
        return tuple(assign[k] for k in range(len(self.vars)))

    def assignment(self, row: Row) -> list[tuple[str, str | None]]:
        return [(var, self.values[k][row[k]]) for k, var in enumerate(self.vars)]

    def label(self, row: Row) -> str:
        return ",".join(
            f"{var}={UNSET_LABEL if val is None else val}" for var, val in self.assignment(row)
        )

    def setup(self, row: Row, name: str, origin: str) -> Setup:
        assignment = self.assignment(row)
        meta: list[tuple[str, str]] = []
        if self.base is not None:
            meta.append(("base", self.base.name))
        meta.append(("vary", self.label(row)))
        return Setup(
            name=name,
            atoms=apply_assignment(self.base.atoms if self.base else (), assignment),
            origin=origin,
            meta=tuple(meta),
        )


def apply_assignment(
    base_atoms: Sequence[Atom], assignment: Sequence[tuple[str, str | None]]
) -> tuple[Atom, ...]:
    """Base atoms with each assigned variable replaced.

    A new value takes the place of the variable's first atom in the base (all
    its other atoms, e.g. path entries, go); ``None`` becomes an unset atom (as
    ``VAR: null`` in ``setups:``: a row labelled unset must not inherit the caller's value); a
    variable the base lacks is appended in assignment order.
    """
    new = {var: val for var, val in assignment}
    out: list[Atom] = []
    placed: set[str] = set()
    for atom in base_atoms:
        if atom.var not in new:
            out.append(atom)
            continue
        if atom.var not in placed:
            placed.add(atom.var)
            out.append(_assigned(atom.var, new[atom.var]))
    for var, val in assignment:
        if var not in placed:
            out.append(_assigned(var, val))
    return tuple(out)


def _assigned(var: str, value: str | None) -> Atom:
    return Atom(var, UNSET) if value is None else Atom(var, SET, value)


def _value(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, (Mapping, list, tuple, set)):
        raise ConfigError(
            f"{where}: {value!r} is not a single value; allowed: a string, number, bool or null (unset)"
        )
    return scalar_to_str(value, where)


def parse_space(spec: Mapping[str, Any], base: Setup | None, ctx: StrategyContext, key: str = "vars") -> Space:
    """Parse ``vars:`` and ``forbid:`` of a product/pairwise/random spec; ``key`` is the name the varied variables
    have in the user's file (``search.space`` for a search), so every message names what was written."""
    where = f"{ctx.where}.{key}"
    raw = spec.get(key)
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(
            f"{where}: expected a non-empty mapping VAR: [values] or VAR: all; got {raw!r}"
        )
    names: list[str] = []
    values: list[tuple[str | None, ...]] = []
    for var, vals in raw.items():
        vwhere = f"{where}.{var}"
        var = var_name(vwhere, var)  # as setups' keys: 'A=B' ran as A='B=x', 'C\nD' as two variables
        refuse_pinned(var, ctx, vwhere)
        if isinstance(vals, str):
            if vals != "all":
                raise ConfigError(
                    f"{vwhere}: {vals!r} is not allowed{did_you_mean(vals, ['all'])}; "
                    "allowed: a list of values (null = unset) or 'all'"
                )
            try:
                listed: list[Any] = list(ctx.values.values(var))
            except ConfigError as exc:
                raise ConfigError(f"{vwhere}: 'all': {exc}") from None
            if not listed:
                raise ConfigError(f"{vwhere}: 'all': the catalog knows no values of {var}; list them")
        elif isinstance(vals, (list, tuple)):
            listed = list(vals)
            if not listed:
                raise ConfigError(f"{vwhere}: empty list; give at least one value (null = unset) or 'all'")
        else:
            raise ConfigError(
                f"{vwhere}: {vals!r} is not allowed; allowed: a list of values (null = unset) or 'all'"
            )
        converted = [_value(v, f"{vwhere}[{i}]") for i, v in enumerate(listed)]
        names.append(var)
        values.append(tuple(dict.fromkeys(converted)))  # de-duplicate, keep order

    forbid = _parse_forbid(spec.get("forbid"), names, values, f"{ctx.where}.forbid")
    return Space(base=base, vars=tuple(names), values=tuple(values), forbid=forbid)


def _parse_forbid(
    raw: Any,
    names: list[str],
    values: list[tuple[str | None, ...]],
    where: str,
) -> tuple[tuple[tuple[int, int], ...], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)):
        raise ConfigError(f"{where}: expected a list of mappings {{VAR: value, ...}}; got {raw!r}")
    out: list[tuple[tuple[int, int], ...]] = []
    for i, entry in enumerate(raw):
        ewhere = f"{where}[{i}]"
        if not isinstance(entry, Mapping) or not entry:
            raise ConfigError(f"{ewhere}: expected a non-empty mapping {{VAR: value, ...}}; got {entry!r}")
        pairs: list[tuple[int, int]] = []
        for var, value in entry.items():
            var = str(var)
            if var not in names:
                raise ConfigError(
                    f"{ewhere}.{var}: not one of the varied variables{did_you_mean(var, names)}; "
                    f"allowed: {', '.join(names)}"
                )
            k = names.index(var)
            val = _value(value, f"{ewhere}.{var}")
            if val not in values[k]:
                shown = ", ".join("null" if v is None else repr(v) for v in values[k])
                raise ConfigError(
                    f"{ewhere}.{var}: {value!r} is not among the values of {var}; allowed: {shown}"
                )
            pairs.append((k, values[k].index(val)))
        out.append(tuple(sorted(pairs)))
    return tuple(out)


def seeded_space(spec: Mapping[str, Any], ctx: StrategyContext) -> tuple[Space, int, str]:
    """A seeded strategy's space, seed (``seed:`` or the run's) and name prefix (pairwise, random)."""
    base = resolve_base(spec.get("base"), ctx, required=False)
    space = parse_space(spec, base, ctx)
    seed = int_option(spec, "seed", ctx.where, default=ctx.seed, minimum=-(2**63))
    return space, seed, name_prefix(spec, base, ctx.where)
