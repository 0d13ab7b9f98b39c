"""Processes and named network namespaces: the argv that runs a command inside one (as an emulated host, with
its own hostname and /etc/hosts), the processes living in one, and killing them. No ``ip`` binary needed: the
entry point (``envmatrix.execution.netns_enter``) switches namespaces itself, so the GPU box without iproute2
works too.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Optional, Sequence

NETNS_DIR = "/run/netns"
ETC_NETNS_DIR = "/etc/netns"  # per-namespace files bind-mounted over /etc (ip netns exec's convention)


def netns_argv(netns: str, argv: Sequence[str], hostname: Optional[str] = None) -> list[str]:
    """``argv`` run inside ``netns`` (and a UTS namespace named ``hostname``); give it to any process starter."""
    if isinstance(argv, str):
        raise TypeError("argv must be a sequence, never a shell string")
    host = ["--hostname", hostname] if hostname else []
    return [sys.executable, "-m", "envmatrix.execution.netns_enter", netns, *host, "--", *argv]


def _inode(path: str) -> Optional[tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def pids_in_netns(netns: str) -> list[int]:
    """Processes whose network namespace is ``netns`` (``ip netns pids``)."""
    want = _inode(os.path.join(NETNS_DIR, netns))
    if want is None:
        return []
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and entry != str(os.getpid()) and _inode(f"/proc/{entry}/ns/net") == want:
            found.append(int(entry))
    return found


def kill_netns_processes(netns: str, wait_s: float = 5.0) -> list[int]:
    """SIGKILL everything in ``netns`` until nothing is left or ``wait_s`` passed; the survivors' pids."""
    deadline = time.monotonic() + wait_s
    while True:
        pids = pids_in_netns(netns)
        if not pids or time.monotonic() >= deadline:
            return pids
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
