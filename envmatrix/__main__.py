"""``python -m envmatrix`` and the ``envmatrix`` console script (pyproject's [project.scripts]): both start here, so
a Ctrl-C (SIGTERM, SIGHUP) while the command line is imported is exit 130 for either."""

import os
import signal
import sys


def _interrupted_while_starting(signum, _frame):
    # Nothing has started or been written yet: leave at once, one line, no KeyboardInterrupt traceback out of
    # whatever import the signal landed in (os._exit: a SystemExit raised inside a finalizer would be dropped).
    what = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
    os.write(2, f"envmatrix: {what}\n".encode())
    os._exit(130)  # errors.EXIT_INTERRUPTED, not imported: this runs before any envmatrix module is


def entry() -> int:
    # First, before the command line is imported: from here on a Ctrl-C (SIGTERM, SIGHUP: interrupts.SIGNALS) is exit
    # 130. What comes before (Python's own start-up, site's .pth files) is out of envmatrix's reach.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupted_while_starting)
    from envmatrix.cli import main

    code = main()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the command is done: a Ctrl-C during teardown changes nothing
    return code


if __name__ == "__main__":
    sys.exit(entry())
