"""One sweep at a time per store: a second process is refused with a line naming the first.

Chosen over shared claims: a sweep's resume already skips what the store holds, so the
second process can simply be rerun once the first is done, and an flock is released by the
kernel when its holder dies (even on SIGKILL), so there is no stale-lock cleanup. The lock
file sits next to the store; it is never deleted (unlinking a locked file lets a third
process lock a new inode while the second still holds the old one).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from typing import Iterator

from envmatrix.errors import ConfigError
from envmatrix.store.sqlite import check_not_corrupt


class StoreBusy(ConfigError):
    """Another process holds the store: nothing was launched or written."""


def lock_path(store_path: str) -> str:
    return f"{store_path}.lock"


def _holder(fd: int) -> dict:
    # The holder writes its identity right after locking; give a racing reader a moment.
    for _ in range(20):
        try:
            data = json.loads(os.pread(fd, 65536, 0).decode() or "null")
        except (OSError, ValueError):
            data = None
        if data:
            return data
        time.sleep(0.05)
    return {}


@contextlib.contextmanager
def exclusive(store_path: str, command: str) -> Iterator[None]:
    """Hold the store for this process; StoreBusy (exit 2) naming the holder when another has it."""
    # A corrupt store is refused before the lock file exists: bad input leaves the run dir untouched.
    check_not_corrupt(store_path)
    path = lock_path(store_path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            h = _holder(fd)
            since = time.strftime("%H:%M:%S", time.localtime(h["started"])) if h.get("started") else "?"
            raise StoreBusy(
                f"--out: store {store_path} is in use by envmatrix pid {h.get('pid', '?')} on {h.get('host', '?')} "
                f"since {since} ({h.get('command', '?')}); allowed: wait for it to finish, then rerun to resume, "
                f"or use another --out"
            ) from None
        previous = os.pread(fd, os.fstat(fd).st_size, 0)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "command": command}
        _rewrite(fd, json.dumps(me).encode())
        try:
            yield
        except ConfigError:
            # bad input found under the lock (bisect --failing reads the store only once it holds it) writes nothing:
            # the last holder's record stays as it was
            _rewrite(fd, previous)
            raise
    finally:
        os.close(fd)  # releases the flock


def _rewrite(fd: int, data: bytes) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
