"""The driver's sentinel: ``python -m envmatrix.execution.sentinel``, one per driver, started with the first run.

A driver killed with SIGKILL runs no cleanup: its ranks die of their death signal (PR_SET_PDEATHSIG), but what they
started does not (a grandchild that ignores SIGTERM ran on, re-parented to init). The sentinel outlives the driver
for that: the driver tells it, one JSON line each on its stdin, which runs are under way (``{"add": ID, "since":
TICKS, "markers": [[ENTRY, ...], ...]}``: processes.kill_strays' arguments) and which are cleaned up
(``{"done": ID}``). When its stdin ends, the driver is gone: the runs still under way get ``kill_strays``, then it
exits. A driver that ended normally left none under way, so nothing is killed then.
"""

from __future__ import annotations

import json
import sys

from envmatrix.execution.processes import kill_strays


def main() -> int:
    running: dict[str, tuple[int, list[frozenset[bytes]]]] = {}
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "add" in msg:
            markers = [frozenset(entry.encode("latin-1") for entry in marker) for marker in msg["markers"]]
            running[str(msg["add"])] = (int(msg["since"]), markers)
        elif "done" in msg:
            running.pop(str(msg["done"]), None)
    for since, markers in running.values():
        kill_strays(since, markers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
