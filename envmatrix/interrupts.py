"""A Ctrl-C the command has been told of, until the command line has answered it (exit 130).

The first Ctrl-C's handler (cli) raises KeyboardInterrupt wherever the main thread is at that moment. When that
is inside a finalizer (Popen.__del__, a file's close, a generator's cleanup), CPython prints "Exception ignored"
and drops the exception, and the command went on waiting for the run until its timeout. So the handler also notes
the interrupt here, and every loop that waits on processes (execution.processes.run_group, in any thread: packed
runs and host rounds wait in worker threads) raises it at its next step, which also stops runs in worker threads
that a KeyboardInterrupt in the main thread never reaches.
"""

from __future__ import annotations

import threading

_pending = threading.Event()


def note() -> None:
    """A Ctrl-C came (called from the signal handler)."""
    _pending.set()


def clear() -> None:
    """The command line has answered it."""
    _pending.clear()


def raise_pending() -> None:
    """KeyboardInterrupt when a Ctrl-C is noted and not yet answered."""
    if _pending.is_set():
        raise KeyboardInterrupt
