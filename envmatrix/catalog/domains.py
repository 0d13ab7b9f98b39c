"""Value domains of catalogued variables.

A domain answers three questions a sweep or a config check asks about one variable:
is this value allowed (``contains``), what is allowed, in a few words for an error
message (``describe``), and which values are there to try (``enumerate``; None
when the set is open, so the catalog falls back to its ``examples``).

Values are always env strings: NCCL and friends parse ``getenv`` text, so ``"08"``
and ``"8"`` are different inputs and we never coerce them.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Mapping

from envmatrix.errors import ConfigError

_INT_RE = re.compile(r"-?[0-9]+")
_FUNC_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*")


class Domain(ABC):
    """The set of strings a variable may be set to."""

    kind: str = ""

    @abstractmethod
    def contains(self, value: str) -> bool: ...

    @abstractmethod
    def describe(self) -> str: ...

    def enumerate(self) -> list[str] | None:
        """All values, when the set is small and closed; else None."""
        return None

    def canonical(self, value: str) -> str:
        """The spelling sweeps should use for ``value`` (aliases resolved)."""
        return value


def _fold(text: str, ignore_case: bool) -> str:
    return text.casefold() if ignore_case else text


@dataclass(frozen=True)
class EnumDomain(Domain):
    """A closed set of names, optionally with legacy aliases (``"3"`` -> ``PHB``)."""

    items: tuple[str, ...]
    aliases: tuple[tuple[str, str], ...] = ()
    ignore_case: bool = False
    kind = "enum"

    def _lookup(self, value: str) -> str | None:
        key = _fold(value, self.ignore_case)
        for item in self.items:
            if _fold(item, self.ignore_case) == key:
                return item
        for alias, target in self.aliases:
            if _fold(alias, self.ignore_case) == key:
                return target
        return None

    def contains(self, value: str) -> bool:
        return self._lookup(value) is not None

    def canonical(self, value: str) -> str:
        return self._lookup(value) or value

    def enumerate(self) -> list[str]:
        return list(self.items)

    def describe(self) -> str:
        text = ", ".join(self.items)
        if not self.aliases:
            return text
        keys = [a for a, _ in self.aliases]
        if all(_INT_RE.fullmatch(k) for k in keys):
            nums = sorted(int(k) for k in keys)
            if nums == list(range(nums[0], nums[-1] + 1)):
                return f"{text} (aliases {nums[0]}-{nums[-1]})"
        return f"{text} (aliases {', '.join(f'{a}={t}' for a, t in self.aliases)})"


@dataclass(frozen=True)
class BoolDomain(Domain):
    """NCCL's 0/1 switches; ``true``/``yes`` are not what NCCL's atoi reads."""

    kind = "bool"

    def contains(self, value: str) -> bool:
        return value in ("0", "1")

    def enumerate(self) -> list[str]:
        return ["0", "1"]

    def describe(self) -> str:
        return "0 or 1"


@dataclass(frozen=True)
class IntDomain(Domain):
    """A plain decimal integer with optional bounds and a power-of-two rule."""

    min: int | None = None
    max: int | None = None
    pow2: bool = False
    kind = "int"
    noun = "integer"

    def contains(self, value: str) -> bool:
        if not _INT_RE.fullmatch(value):
            return False
        number = int(value)
        if self.min is not None and number < self.min:
            return False
        if self.max is not None and number > self.max:
            return False
        return not self.pow2 or (number > 0 and number & (number - 1) == 0)

    def describe(self) -> str:
        if self.min is not None and self.max is not None:
            text = f"{self.noun} {self.min}..{self.max}"
        elif self.min is not None:
            text = f"{self.noun} >= {self.min}"
        elif self.max is not None:
            text = f"{self.noun} <= {self.max}"
        else:
            text = f"any {self.noun}"
        return f"{text}, power of 2" if self.pow2 else text


@dataclass(frozen=True)
class BytesDomain(IntDomain):
    """A byte count; plain integers only, because NCCL reads no K/M suffixes."""

    kind = "bytes"
    noun = "byte count (plain integer)"


@dataclass(frozen=True)
class StringDomain(Domain):
    """Free text (interface names, plugin names, files), optionally matched by a regex."""

    pattern: str | None = None
    kind = "string"

    def contains(self, value: str) -> bool:
        return self.pattern is None or re.fullmatch(self.pattern, value) is not None

    def describe(self) -> str:
        return "any string" if self.pattern is None else f"a string matching {self.pattern}"


@dataclass(frozen=True)
class ListDomain(Domain):
    """A separated subset of known items, e.g. ``NCCL_ALGO=^Tree`` or ``Ring,Tree``.

    ``per_function`` also accepts NCCL 2.24's ``[list;]func:list;...`` form
    (the function name may be left off the first entry only). ``layer_sep`` lets
    one entry be several items, for libfabric's layered ``verbs;ofi_rxm``.
    """

    items: tuple[str, ...]
    sep: str = ","
    negate_prefix: str | None = "^"
    ignore_case: bool = False
    per_function: bool = False
    layer_sep: str | None = None
    kind = "list"

    def _item_ok(self, token: str) -> bool:
        parts = token.split(self.layer_sep) if self.layer_sep else [token]
        known = {_fold(i, self.ignore_case) for i in self.items}
        return all(p and _fold(p, self.ignore_case) in known for p in parts)

    def _plain_ok(self, text: str) -> bool:
        if self.negate_prefix and text.startswith(self.negate_prefix):
            text = text[len(self.negate_prefix):]
        return bool(text) and all(self._item_ok(t) for t in text.split(self.sep))

    def contains(self, value: str) -> bool:
        if not (self.per_function and (":" in value or ";" in value)):
            return self._plain_ok(value)
        for index, part in enumerate(value.split(";")):
            if ":" in part:
                func, part = part.split(":", 1)
                if not _FUNC_RE.fullmatch(func):
                    return False
            elif index > 0:
                return False
            if not self._plain_ok(part):
                return False
        return True

    def describe(self) -> str:
        joiner = "comma" if self.sep == "," else repr(self.sep)
        text = f"{joiner}-separated subset of {', '.join(self.items)}"
        if self.negate_prefix:
            text += f" (leading {self.negate_prefix} excludes)"
        if self.per_function:
            text += "; or per function: list;func:list;..."
        return text


@dataclass(frozen=True)
class PathListDomain(Domain):
    """Colon-separated paths; anything goes, entries are separate atoms."""

    kind = "path_list"

    def contains(self, value: str) -> bool:
        return True

    def describe(self) -> str:
        return "colon-separated paths"


def _opts(raw: Any, where: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if raw is None or raw is True:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping of options {list(allowed)}, got {raw!r}")
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise ConfigError(f"{where}: options {unknown} not allowed; allowed: {', '.join(allowed)}")
    return raw


def literal(raw: Any, where: str) -> str:
    """A catalog literal (enum item, alias): str or int; YAML bools/floats are mistakes."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        raise ConfigError(f"{where}: {raw!r} must be a string or integer (quote it, e.g. \"OFF\" or \"2.10\")")
    return str(raw)


def _bound(raw: Any, where: str) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ConfigError(f"{where}: {raw!r} must be an integer")
    return raw


def _flag(raw: Any, where: str) -> bool:
    if not isinstance(raw, bool):
        raise ConfigError(f"{where}: {raw!r} must be true or false")
    return raw


def _names(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: expected a non-empty list, got {raw!r}")
    return tuple(literal(v, f"{where}.{i}") for i, v in enumerate(raw))


DOMAIN_KINDS = ("enum", "bool", "int", "bytes", "string", "list", "path_list")


def parse_domain(raw: Any, where: str) -> Domain:
    """Build a Domain from its catalog mapping; ``where`` names file and key for errors."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping with one of {', '.join(DOMAIN_KINDS)}, got {raw!r}")
    kinds = [k for k in raw if k in DOMAIN_KINDS]
    if len(kinds) != 1:
        raise ConfigError(f"{where}: needs exactly one kind of {', '.join(DOMAIN_KINDS)}; got {sorted(map(str, raw))}")
    kind = kinds[0]
    extra = sorted(str(k) for k in raw if k != kind and not (kind == "enum" and k in ("aliases", "ignore_case")))
    if extra:
        raise ConfigError(f"{where}: keys {extra} not allowed next to {kind}")
    body, at = raw[kind], f"{where}.{kind}"
    if kind == "enum":
        items = _names(body, at)
        aliases_raw = raw.get("aliases") or {}
        if not isinstance(aliases_raw, Mapping):
            raise ConfigError(f"{where}.aliases: expected a mapping alias: item, got {aliases_raw!r}")
        aliases = tuple((literal(a, f"{where}.aliases"), literal(t, f"{where}.aliases.{a}")) for a, t in aliases_raw.items())
        for alias, target in aliases:
            if target not in items:
                raise ConfigError(f"{where}.aliases.{alias}: target {target!r} is not an item; allowed: {', '.join(items)}")
        return EnumDomain(items, aliases, _flag(raw.get("ignore_case", False), f"{where}.ignore_case"))
    if kind in ("bool", "path_list"):
        if body is not True:
            raise ConfigError(f"{at}: must be true, got {body!r}")
        return BoolDomain() if kind == "bool" else PathListDomain()
    if kind in ("int", "bytes"):
        opts = _opts(body, at, ("min", "max", "pow2"))
        cls = IntDomain if kind == "int" else BytesDomain
        return cls(_bound(opts.get("min"), f"{at}.min"), _bound(opts.get("max"), f"{at}.max"),
                   _flag(opts.get("pow2", False), f"{at}.pow2"))
    if kind == "string":
        pattern = _opts(body, at, ("pattern",)).get("pattern")
        if pattern is not None:
            try:
                re.compile(str(pattern))
            except re.error as exc:
                raise ConfigError(f"{at}.pattern: {pattern!r} is not a valid regex ({exc})") from None
            pattern = str(pattern)
        return StringDomain(pattern)
    opts = _opts(body, at, ("items", "sep", "negate_prefix", "ignore_case", "per_function", "layer_sep"))
    return ListDomain(
        items=_names(opts.get("items"), f"{at}.items"),
        sep=str(opts.get("sep", ",")),
        negate_prefix=None if opts.get("negate_prefix", "^") is None else str(opts.get("negate_prefix", "^")),
        ignore_case=_flag(opts.get("ignore_case", False), f"{at}.ignore_case"),
        per_function=_flag(opts.get("per_function", False), f"{at}.per_function"),
        layer_sep=None if opts.get("layer_sep") is None else str(opts["layer_sep"]),
    )
