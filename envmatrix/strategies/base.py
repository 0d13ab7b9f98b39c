"""Strategy protocol, context and registry (optuna-style: one small class per kind).

A strategy turns one ``strategies:`` entry of the config (a mapping with
``kind:``) into a list of :class:`~envmatrix.env.atoms.Setup`. Every error it
raises is a one-line :class:`~envmatrix.errors.ConfigError` that starts with
``ctx.where`` (``"<file>: strategies[i]"``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Optional, Protocol, runtime_checkable

from envmatrix.env.atoms import Setup, scalar_to_str
from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.paths import check_name
from envmatrix.registry import Registry

# the most setups one strategy entry may expand to: each is a probe per grid, and past this a sweep is days of probes
MAX_SETUPS = 10_000


@runtime_checkable
class ValueSource(Protocol):
    """What strategies need from the variable catalog (never imported here)."""

    def values(self, var: str) -> list[str]:
        """Enumerable values of ``var``; raises ConfigError if it has none."""
        ...

    def is_pinned(self, var: str) -> bool:
        """Safety pins (NCCL_NVLS_ENABLE, ...) must never be varied."""
        ...


@dataclass(frozen=True)
class StrategyContext:
    """What a strategy may look at besides its own spec.

    ``named``: setups by name, in order (explicit ones first, then the output of
    earlier strategies, so a ``base:`` may name either). ``where``: the prefix of
    every error message, e.g. ``"sweep.yaml: strategies[2]"``.
    """

    named: Mapping[str, Setup]
    values: ValueSource
    seed: int = 0
    where: str = "strategies"


class Strategy(ABC):
    """One ``kind:`` of strategy. Subclasses set ``kind`` and ``keys``."""

    kind: ClassVar[str]
    #: allowed spec keys besides ``kind``
    keys: ClassVar[tuple[str, ...]] = ()
    #: keys that must be present
    required: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def generate(self, spec: Mapping[str, Any], ctx: StrategyContext) -> list[Setup]:
        """The setups this spec stands for, in a deterministic order."""

    # -- helpers shared by the concrete strategies --------------------------

    def check_spec(self, spec: Any, where: str) -> None:
        """Refuse a non-mapping spec, unknown keys and missing required keys."""
        if not isinstance(spec, Mapping):
            raise ConfigError(
                f"{where}: a strategy must be a mapping with `kind:`; got {type(spec).__name__}"
            )
        allowed = sorted({"kind", *self.keys})
        for key in spec:
            if key not in allowed:
                raise ConfigError(
                    f"{where}: unknown key {str(key)!r} for kind {self.kind}"
                    f"{did_you_mean(str(key), allowed)}; allowed: {', '.join(allowed)}"
                )
        for key in self.required:
            if spec.get(key) is None:
                raise ConfigError(
                    f"{where}: kind {self.kind} needs `{key}:`; allowed keys: {', '.join(allowed)}"
                )


# -- registry -----------------------------------------------------------------

_REGISTRY: Registry[type[Strategy]] = Registry("strategy kind")


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: make ``cls`` available under ``cls.kind``."""
    if not (isinstance(cls, type) and issubclass(cls, Strategy)):
        raise ValueError(f"{cls!r}: only Strategy subclasses can be registered")
    return _REGISTRY.add(getattr(cls, "kind", None), cls)


def registered_kinds() -> list[str]:
    return list(_REGISTRY.names())


def get_strategy(kind: Any, where: str) -> Strategy:
    """A fresh instance of the strategy registered under ``kind``."""
    allowed = ", ".join(registered_kinds())
    if kind is None:
        raise ConfigError(f"{where}: missing `kind:`; allowed: {allowed}")
    if not isinstance(kind, str):
        raise ConfigError(f"{where}: kind {kind!r} is not a string; allowed: {allowed}")
    return _REGISTRY.get(kind, where)()


# -- small shared parsers -------------------------------------------------------


def resolve_base(value: Any, ctx: StrategyContext, *, required: bool) -> Setup | None:
    """The setup named by ``base:`` (None when absent and not required)."""
    where = f"{ctx.where}.base"
    names = list(ctx.named)
    if value is None:
        if required:
            raise ConfigError(f"{where}: a base setup is required; known setups: {', '.join(names) or '(none)'}")
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ConfigError(f"{where}: {value!r} is not a setup name; known setups: {', '.join(names) or '(none)'}")
    name = str(value)
    if name not in ctx.named:
        raise ConfigError(
            f"{where}: unknown setup {name!r}{did_you_mean(name, names)}; "
            f"known setups: {', '.join(names) or '(none)'}"
        )
    return ctx.named[name]


def refuse_pinned(var: str, ctx: StrategyContext, where: str) -> None:
    if ctx.values.is_pinned(var):
        raise ConfigError(f"{where}: {var} is a safety pin and cannot be varied")


def name_prefix(spec: Mapping[str, Any], base: Setup | None, where: str) -> str:
    """``name:`` if given, else ``"<base>+"`` with a base, else ``""``."""
    prefix = spec.get("name")
    if prefix is None:
        return f"{base.name}+" if base is not None else ""
    if isinstance(prefix, (Mapping, list, tuple)):
        raise ConfigError(f"{where}.name: {prefix!r} is not a string; allowed: a name prefix such as 'sweep-'")
    text = scalar_to_str(prefix, f"{where}.name")
    # it starts every generated setup's name, which names log folders and report rows as a config's setup names do
    return check_name(text, f"{where}.name", strict=False) if text else text


def int_option(spec: Mapping[str, Any], key: str, where: str, default: int, minimum: int,
               maximum: Optional[int] = None) -> int:
    value = spec.get(key)
    if value is None:
        return default
    if (isinstance(value, bool) or not isinstance(value, int) or value < minimum
            or (maximum is not None and value > maximum)):
        upto = f" and <= {maximum}" if maximum is not None else ""
        raise ConfigError(f"{where}.{key}: {value!r} is not allowed; allowed: an integer >= {minimum}{upto}")
    return value
