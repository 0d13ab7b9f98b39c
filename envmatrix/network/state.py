"""What envmatrix installed on which link, written down before it is installed, so a killed run is cleaned up.

One JSON file per owning process (``<state root>/network/<pid>.json``, holding the pid's start time so a reused
pid is not mistaken for the owner). ``shaping`` records an entry before it touches a link and forgets it once the
link is restored; a run that ends normally or by Ctrl-C leaves no file. After a kill -9 the file stays, and the
next command's ``reap_stale`` undoes its entries and says so in one line.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Callable, Optional

STATE_ENV = "ENVMATRIX_STATE_DIR"  # tests point it elsewhere; the default survives nothing but the boot
DEFAULT_STATE_ROOT = "/run/envmatrix"
_OWN_FILE_LOCK = threading.Lock()  # threads of one process share its file (read, change, replace)


def state_root() -> Path:
    return Path(os.environ.get(STATE_ENV) or DEFAULT_STATE_ROOT)


def _dir() -> Path:
    return state_root() / "network"


def process_start_time(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def owner_alive(pid: int, start_time: Optional[int]) -> bool:
    now = process_start_time(pid)
    return now is not None and (start_time is None or now == start_time)


def _own_file() -> Path:
    return _dir() / f"{os.getpid()}.json"


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def record(key: str, entry: dict) -> None:
    """Write ``entry`` (what is about to be installed, and what to restore) under ``key`` before installing it."""
    with _OWN_FILE_LOCK:
        path = _own_file()
        data = _read(path) or {"pid": os.getpid(), "start_time": process_start_time(os.getpid()), "entries": {}}
        data["entries"][key] = entry
        _write(path, data)


def forget(key: str) -> None:
    drop_entry(_own_file(), key)


def entries(include_live: bool = False) -> list[tuple[Path, str, dict]]:
    """(state file, key, entry) of dead owners' entries (and live ones' too with ``include_live``)."""
    found = []
    for path in sorted(_dir().glob("*.json")) if _dir().is_dir() else []:
        data = _read(path)
        if not data:
            path.unlink(missing_ok=True)
            continue
        if not include_live and owner_alive(int(data.get("pid", 0)), data.get("start_time")):
            continue
        for key, entry in data.get("entries", {}).items():
            found.append((path, key, entry))
    return found


def owner(path: Path) -> tuple[Optional[int], bool]:
    """The pid that wrote the state file, and whether it still runs."""
    data = _read(path)
    pid = data.get("pid")
    return pid, bool(pid) and owner_alive(int(pid), data.get("start_time"))


def drop_entry(path: Path, key: str) -> None:
    with _OWN_FILE_LOCK:
        data = _read(path)
        if not data:
            return
        data.get("entries", {}).pop(key, None)
        if data.get("entries"):
            _write(path, data)
        else:
            path.unlink(missing_ok=True)


def reap_stale(report: Optional[Callable[[str], None]] = None, include_live: bool = False) -> list[str]:
    """Undo what killed runs left installed (``include_live``: every run's, for ``network reset``).

    Returns one description per removed item and, when there was any, says so through ``report`` in one line.
    Cheap when there is nothing to do: no netlink is opened then.
    """
    stale = entries(include_live)
    if not stale:
        return []
    from envmatrix.network import shaping  # netlink only when there is something to undo

    removed: list[str] = []
    failed: list[str] = []
    for path, key, entry in stale:
        try:
            removed += shaping.undo_entry(entry)
        except Exception as exc:  # noqa: BLE001 - kept in the file: the next command (as root) tries again
            failed.append(f"{entry.get('ifname')} ({exc})")
            continue
        drop_entry(path, key)
    if report is not None and removed:
        who = "a killed run" if not include_live else "envmatrix"
        report(f"envmatrix: removed network shaping left by {who}: {'; '.join(removed)}")
    if report is not None and failed:
        report(f"envmatrix: could not remove network shaping left by a killed run on {', '.join(failed)}; "
               "run envmatrix network reset as root")
    return removed
