"""Atoms are the unit that sweeps vary and bisect removes.

A plain assignment is one atom; each entry of a path list (LD_LIBRARY_PATH,
LD_PRELOAD, ...) is its own atom, so seed 003's two LD_LIBRARY_PATH prepends
can be bisected separately.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from envmatrix import values
from envmatrix.errors import ConfigError

SET, UNSET, PREPEND, APPEND = "set", "unset", "prepend", "append"
PATH_OPS = (PREPEND, APPEND)


@dataclass(frozen=True)
class Atom:
    var: str
    op: str = SET
    value: str = ""

    def __str__(self) -> str:
        return self.render(lambda value: value, "")

    def render(self, quote: Callable[[str], str], assign: str) -> str:
        """The atom as one line of shell: ``assign`` before an assignment ("export "), values through ``quote``."""
        if self.op == UNSET:
            return f"unset {self.var}"
        if self.op == SET:
            return f"{assign}{self.var}={quote(self.value)}"
        if self.op == PREPEND:
            return f"{assign}{self.var}={quote(self.value)}:${self.var}"
        return f"{assign}{self.var}=${self.var}:{quote(self.value)}"

    def to_json(self) -> dict[str, str]:
        return {"var": self.var, "op": self.op, "value": self.value}

    @classmethod
    def from_json(cls, data: Mapping[str, str]) -> "Atom":
        return cls(var=data["var"], op=data["op"], value=data.get("value", ""))


@dataclass(frozen=True)
class Setup:
    """A named env bundle: the columns of seed 003's tables."""

    name: str
    atoms: tuple[Atom, ...] = ()
    origin: str = "explicit"
    meta: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.var for a in self.atoms))

    def assignments(self) -> dict[str, str]:
        """VAR -> value for plain assignments (path atoms and unsets excluded)."""
        return {a.var: a.value for a in self.atoms if a.op == SET}

    def digest(self) -> str:
        canon = json.dumps([a.to_json() for a in self.atoms], sort_keys=True)
        return hashlib.sha256(canon.encode()).hexdigest()[:12]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "origin": self.origin,
            "atoms": [a.to_json() for a in self.atoms],
        }

    def shell_lines(self) -> list[str]:
        """``export`` lines a shell can source; prepends come last entry first, as users write them."""
        return [shell_line(a) for a in in_shell_order(self.atoms)]


def in_shell_order(atoms: Sequence[Atom]) -> list[Atom]:
    """``atoms`` in the order that, applied one after the other, gives the env: a variable's prepends last entry
    first (``{prepend: [a, b]}`` is ``a:b:$VAR``, so b is prepended first)."""
    out, done = [], set()
    for atom in atoms:
        if atom.op != PREPEND:
            out.append(atom)
        elif atom.var not in done:
            done.add(atom.var)
            out += [a for a in reversed(atoms) if a.var == atom.var and a.op == PREPEND]
    return out


def shell_line(atom: Atom) -> str:
    """``atom`` as a line a shell can source. A path entry adds its ':' only where the variable is set and not empty:
    ``X:$VAR`` leaves ``X:`` there, and an empty entry of LD_LIBRARY_PATH or PATH is the current directory, which the
    run never had (env/merge.py joins the non-empty parts only)."""
    import shlex

    if atom.op == PREPEND:
        return f"export {atom.var}={shlex.quote(atom.value)}${{{atom.var}:+:${atom.var}}}"
    if atom.op == APPEND:
        return f"export {atom.var}=${{{atom.var}:+${atom.var}:}}{shlex.quote(atom.value)}"
    return atom.render(shlex.quote, "export ")


def scalar_to_str(value: Any, where: str) -> str:
    """YAML scalars become env strings; bools follow NCCL's 0/1 convention."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, str) and "\x00" in value:
        # execve cannot pass it: the run would fail with 'embedded null byte' instead of a refusal
        raise ConfigError(f"{where}: value {value!r} contains a NUL byte; allowed: text without NUL")
    if isinstance(value, (int, float, str)):
        return str(value)
    raise ConfigError(
        f"{where}: value {value!r} is a {type(value).__name__}; "
        "allowed: a string, number, bool, null (unset) or {prepend|append: [paths]}"
    )


def atoms_from_mapping(env: Mapping[str, Any], where: str) -> tuple[Atom, ...]:
    """Parse one setup's YAML mapping into atoms.

    ``VAR: value`` sets, ``VAR: null`` unsets, and
    ``VAR: {prepend: [a, b]}`` yields ``a:b:$VAR`` as two atoms (reading order).
    """
    atoms: list[Atom] = []
    for var, value in env.items():
        key = f"{where}.{var}"
        var = values.var_name(key, var)
        if value is None:
            atoms.append(Atom(var, UNSET))
        elif isinstance(value, Mapping):
            unknown = set(value) - set(PATH_OPS)
            if unknown or not value:
                raise ConfigError(
                    f"{key}: keys {sorted(map(str, unknown)) or '[]'} not allowed; "
                    "allowed: prepend, append (each a list of paths)"
                )
            for op in PATH_OPS:
                entries = value.get(op) or []
                if isinstance(entries, str):
                    entries = [entries]
                for entry in entries:
                    atoms.append(Atom(var, op, scalar_to_str(entry, f"{key}.{op}")))
        elif isinstance(value, (list, tuple)):
            raise ConfigError(
                f"{key}: got a list {list(value)!r}; a setup gives one value per variable "
                "(use a strategy such as product to try several values, or {prepend: [...]} for paths)"
            )
        else:
            atoms.append(Atom(var, SET, scalar_to_str(value, key)))
    return tuple(atoms)


def setup_diff(reference: Setup, other: Setup) -> list[str]:
    """Human-readable atoms of ``other`` that differ from ``reference`` (the legend)."""
    ref, oth = set(reference.atoms), set(other.atoms)
    added = [str(a) for a in in_shell_order(other.atoms) if a not in ref]
    removed = [f"-{a}" for a in in_shell_order(reference.atoms) if a not in oth]
    return removed + [f"+{a}" for a in added]


def unique_names(setups: Iterable[Setup]) -> None:
    seen: set[str] = set()
    for s in setups:
        if s.name in seen:
            raise ConfigError(f"setups: name {s.name!r} is used twice; setup names must be unique")
        seen.add(s.name)
