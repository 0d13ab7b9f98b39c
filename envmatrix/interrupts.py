"""A Ctrl-C the command has been told of, until the command line has answered it (exit 130).

The first Ctrl-C's handler (cli) raises KeyboardInterrupt wherever the main thread is at that moment. When that
is inside a finalizer (Popen.__del__, a file's close, a generator's cleanup), CPython prints "Exception ignored"
and drops the exception, and the command went on waiting for the run until its timeout. So the handler also notes
the interrupt here, and every loop that waits on processes (execution.processes.run_group, in any thread: packed
runs and host rounds wait in worker threads) raises it at its next step, which also stops runs in worker threads
that a KeyboardInterrupt in the main thread never reaches.
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Optional

# What stops a command with its cleanup: Ctrl-C, SIGTERM (kill, timeout, Slurm's scancel before its SIGKILL) and
# SIGHUP (the terminal went away); each unwinds as a Ctrl-C does, so ranks, shaping and trials are cleaned up.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_pending = threading.Event()
_first: list[int] = []


def install(handler: Any) -> dict[int, Any]:
    """``handler`` for every signal of SIGNALS; returns the handlers it replaced (none off the main thread, where
    Python refuses handlers: it delivers signals to the main thread only)."""
    previous = {}
    for sig in SIGNALS:
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, TypeError):
            pass
    return previous


def current() -> dict[int, Any]:
    """The handlers installed now for every signal of SIGNALS, as :func:`install` returns them."""
    return {sig: signal.getsignal(sig) for sig in SIGNALS}


def restore(previous: dict[int, Any]) -> None:
    """Put back what :func:`install` replaced (a handler set outside Python: the default action)."""
    for sig, handler in previous.items():
        try:
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        except (ValueError, TypeError):
            pass


def note(signum: int = signal.SIGINT) -> None:
    """An interrupting signal came (called from the signal handler); the first one is remembered."""
    if not _first:
        _first.append(signum)
    _pending.set()


def noted_signal() -> Optional[str]:
    """The name of the first interrupting signal noted and not yet answered (``SIGINT`` for a Ctrl-C)."""
    return signal.Signals(_first[0]).name if _first else None


def described() -> str:
    """How the noted interruption reads to a user: ``Ctrl-C``, or the signal's name (``SIGTERM``)."""
    name = noted_signal()
    return "Ctrl-C" if name in (None, "SIGINT") else name


def clear() -> None:
    """The command line has answered it."""
    _pending.clear()
    _first.clear()
    # CPython notes a KeyboardInterrupt that leaves any exec/eval of a string (a namedtuple's or dataclass's
    # generated code, made while a module is imported) as unhandled, even when the command line catches it, and
    # `python -m envmatrix` then ended by SIGINT (returncode -2) after its message instead of with exit 130 (1 in
    # ~20 Ctrl-Cs 0.3-0.6 s into a sweep). Every exec of a string resets that note first: this one leaves none.
    exec("pass")


def raise_pending() -> None:
    """KeyboardInterrupt when a Ctrl-C is noted and not yet answered."""
    if _pending.is_set():
        raise KeyboardInterrupt
