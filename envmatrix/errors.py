"""The small exception hierarchy every command maps to an exit code.

Messages are one line that names the file/key/value and what is allowed, so the
CLI prints them without a traceback (hydra's CompactHydraException idea).
"""

from __future__ import annotations

import difflib
from typing import Iterable

# One exit-code convention for every command (sweep, bench, bisect, search, diff, report).
EXIT_OK = 0  # all passed / nothing to do
EXIT_FAILURES = 1  # failed or slow cells, culprits found, regressions
EXIT_BAD_INPUT = 2  # usage or bad input: nothing launched or written
EXIT_INCONCLUSIVE = 3  # flaky, probe budget spent, unresolved, a shaped rate not in effect, a diff missing a cell
EXIT_INTERRUPTED = 130  # Ctrl-C / SIGINT, and SIGTERM / SIGHUP (interrupts.SIGNALS)


class EnvmatrixError(Exception):
    """Base class; ``exit_code`` is what the CLI returns."""

    exit_code = 1


class ConfigError(EnvmatrixError):
    """Bad user input: nothing is launched or written when this is raised."""

    exit_code = 2


class PlanError(ConfigError):
    """The input is well formed but cannot be run here (e.g. a grid needs more GPUs)."""


class StoreError(EnvmatrixError):
    exit_code = 1


class NoAnswer(EnvmatrixError):
    """Well-formed input, nothing to give: what was asked about failed (exit 1) or has not finished (exit 3). Like a
    ConfigError, nothing is written when it is raised."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean X?)`` or an empty string; used by every unknown-name error."""
    # Never the rejected name itself: "unknown key 'hosts' (did you mean hosts?)" helps nobody.
    close = difflib.get_close_matches(word, [c for c in candidates if c != word], n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def require(module: str, extra: str, feature: str):
    """Import an optional dependency, or a one-line ConfigError naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module.split(".")[0]:
            raise
        raise ConfigError(f"{feature} needs {module}, which is not installed; install envmatrix[{extra}] "
                          f"(pip install 'envmatrix[{extra}]')") from None
