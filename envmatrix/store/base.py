"""Store ABC + URL-scheme registry (sqlite:///path; postgresql:// comes with search)."""

from __future__ import annotations

import abc
from typing import Any, Iterable, Optional

from envmatrix.registry import Registry
from envmatrix.results import ProbeResult


class ResultStore(abc.ABC):
    @abc.abstractmethod
    def open_sweep(self, sweep_id: str, config: dict[str, Any]) -> None:
        """Record the sweep (idempotent: a resumed sweep reuses its row)."""

    @abc.abstractmethod
    def completed_keys(self, run_keys: Iterable[str]) -> set[str]:
        """Which of these runs already have a result (resume skips them)."""

    @abc.abstractmethod
    def put(self, result: ProbeResult) -> int:
        """Commit one result atomically; returns its attempt number."""

    @abc.abstractmethod
    def latest(self, run_keys: Optional[Iterable[str]] = None, sweep_id: Optional[str] = None) -> list[ProbeResult]:
        """Newest attempt of each run (of a sweep, or of the given keys), in insertion order."""

    @abc.abstractmethod
    def count(self, run_key: Optional[str] = None) -> int:
        """Number of stored attempts (all, or of one run)."""

    @abc.abstractmethod
    def sweeps(self) -> list[dict[str, Any]]:
        """Sweeps in the order they were last opened (a resumed sweep is the newest): {id, created, config}."""

    def check_rows(self) -> None:
        """Refuse (ConfigError, exit 2) a store holding a row that does not decode, before a command launches or
        writes anything; a store that decodes nothing itself has nothing to check."""

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SCHEMES: Registry[type] = Registry("store", "store URL scheme")


def register_scheme(scheme: str):
    return lambda cls: _SCHEMES.add(scheme, cls)


def open_store(url: str) -> ResultStore:
    scheme = url.split(":", 1)[0] if "://" in url else "sqlite"
    return _SCHEMES.get(scheme, f"store {url!r}").from_url(url)
