"""Shared parsing for leave_out / leave_in: base, vars, sizes, labels."""

from __future__ import annotations

import itertools
import string
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from envmatrix.env.atoms import Setup, scalar_to_str
from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.strategies.base import StrategyContext, refuse_pinned, resolve_base


@dataclass(frozen=True)
class Subsets:
    base: Setup
    vars: tuple[str, ...]
    sizes: tuple[int, ...]
    labels: Mapping[str, str]

    def combos(self) -> Iterator[tuple[str, ...]]:
        """Subsets of ``vars``: sizes ascending, itertools.combinations order."""
        for size in self.sizes:
            yield from itertools.combinations(self.vars, size)

    def tag(self, combo: tuple[str, ...]) -> str:
        return "".join(self.labels[v] for v in combo) if combo else "none"

    def setups(self, origin: str, sign: str, meta_key: str, drops: Callable[[set[str]], set[str]]) -> list[Setup]:
        """Per combo, the base without the variables ``drops(combo)`` names, called ``<base><sign><labels>``."""
        out = []
        for combo in self.combos():
            dropped = drops(set(combo))
            atoms = tuple(a for a in self.base.atoms if a.var not in dropped)
            meta = (("base", self.base.name), (meta_key, ",".join(combo)))
            out.append(Setup(name=f"{self.base.name}{sign}{self.tag(combo)}", atoms=atoms, origin=origin, meta=meta))
        return out


def parse_subsets(
    spec: Mapping[str, Any], ctx: StrategyContext, *, min_size: int, default_sizes: list[int] | None = None
) -> Subsets:
    base = resolve_base(spec.get("base"), ctx, required=True)
    assert base is not None
    where = ctx.where

    raw_vars = spec.get("vars")
    if not isinstance(raw_vars, (list, tuple)) or not raw_vars:
        raise ConfigError(f"{where}.vars: expected a non-empty list of variables of setup {base.name!r}; got {raw_vars!r}")
    present = list(base.variables)
    names: list[str] = []
    for i, var in enumerate(raw_vars):
        if not isinstance(var, str) or not var:
            raise ConfigError(f"{where}.vars[{i}]: {var!r} is not a variable name")
        if var in names:
            raise ConfigError(f"{where}.vars[{i}]: {var} is listed twice")
        if var not in present:
            raise ConfigError(
                f"{where}.vars[{i}]: {var} is not set in setup {base.name!r}{did_you_mean(var, present)}; "
                f"allowed: {', '.join(present) or '(the setup is empty)'}"
            )
        refuse_pinned(var, ctx, f"{where}.vars[{i}]")
        names.append(var)
    n = len(names)

    raw_sizes = spec.get("sizes")
    if raw_sizes is None:
        sizes = default_sizes if default_sizes is not None else list(range(1, max(n - 1, 1) + 1))
    else:
        if isinstance(raw_sizes, int) and not isinstance(raw_sizes, bool):
            raw_sizes = [raw_sizes]
        if not isinstance(raw_sizes, (list, tuple)) or not raw_sizes:
            raise ConfigError(f"{where}.sizes: expected a non-empty list of integers {min_size}..{n}; got {raw_sizes!r}")
        for s in raw_sizes:
            if isinstance(s, bool) or not isinstance(s, int) or not min_size <= s <= n:
                raise ConfigError(f"{where}.sizes: {s!r} is not allowed; allowed: integers {min_size}..{n}")
        sizes = sorted(set(raw_sizes))

    labels = _labels(spec.get("labels"), names, f"{where}.labels")
    return Subsets(base=base, vars=tuple(names), sizes=tuple(sizes), labels=labels)


def _labels(raw: Any, names: list[str], where: str) -> dict[str, str]:
    if raw is None and len(names) > len(string.ascii_lowercase):
        raise ConfigError(
            f"{where}: {len(names)} variables but only 26 default labels a..z; give labels: {{VAR: label}}"
        )
    labels = {var: string.ascii_lowercase[i] for i, var in enumerate(names[:26])}
    if raw is None:
        return labels
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping VAR: label; got {raw!r}")
    for var, label in raw.items():
        var = str(var)
        if var not in names:
            raise ConfigError(
                f"{where}.{var}: not one of vars{did_you_mean(var, names)}; allowed: {', '.join(names)}"
            )
        if label is None or isinstance(label, (Mapping, list, tuple)):
            raise ConfigError(f"{where}.{var}: {label!r} is not a label; allowed: a short string such as 'a'")
        text = scalar_to_str(label, f"{where}.{var}")
        if not text:
            raise ConfigError(f"{where}.{var}: a label must not be empty")
        labels[var] = text
    missing = [v for v in names if v not in labels]
    if missing:
        raise ConfigError(f"{where}: no label for {', '.join(missing)}; give one per variable")
    seen: dict[str, str] = {}
    for var in names:
        if labels[var] in seen:
            raise ConfigError(
                f"{where}: label {labels[var]!r} is used by both {seen[labels[var]]} and {var}; labels must be unique"
            )
        seen[labels[var]] = var
    return labels


def check_names(setups: list[Setup], where: str) -> list[Setup]:
    """Refuse two generated setups with one name (ambiguous multi-letter labels)."""
    seen: set[str] = set()
    for s in setups:
        if s.name in seen:
            raise ConfigError(
                f"{where}.labels: the labels make the name {s.name!r} ambiguous; "
                "use labels that do not run together (e.g. single letters)"
            )
        seen.add(s.name)
    return setups
