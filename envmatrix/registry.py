"""The one plugin registry: name -> implementation, shared by every plugin family.

Launchers, probes, strategies, result stores and report formats each hold one
:class:`Registry`. Registering a second, different implementation under a taken
name is a programming error (ValueError at import); asking for an unknown name
is a user error (one-line ConfigError with a did-you-mean and the allowed list).
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, Optional, TypeVar

from envmatrix.errors import ConfigError, did_you_mean

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, family: str, noun: Optional[str] = None) -> None:
        self.family = family  # "launcher": names the registry in the duplicate-registration error
        self.noun = noun or family  # "strategy kind": names the rejected value in the unknown-name error
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{item!r}: a {self.family} needs a non-empty name")
        existing = self._items.get(name)
        if existing is not None and existing is not item:
            raise ValueError(f"{self.family} {name!r} is already registered by {_describe(existing)}; refusing {_describe(item)}")
        self._items[name] = item
        return item

    def remove(self, name: str) -> T:
        """Undo :meth:`add` (a test that plugs in a temporary implementation)."""
        return self._items.pop(name)

    def decorator(self, attribute: str) -> Callable[[T], T]:
        """A class decorator registering the class under its ``attribute`` (``name``, ``kind``)."""

        def register(cls: T) -> T:
            return self.add(getattr(cls, attribute, None), cls)

        return register

    def get(self, name: object, where: str) -> T:
        item = self._items.get(name) if isinstance(name, str) else None
        if item is None:
            raise ConfigError(f"{where}: unknown {self.noun} {name!r}{did_you_mean(str(name), self._items)}; allowed: {', '.join(self.names())}")
        return item

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._items))

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def _describe(item: object) -> str:
    return f"{getattr(item, '__module__', '?')}.{getattr(item, '__qualname__', repr(item))}"
