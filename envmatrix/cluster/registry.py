"""Which emulated clusters exist: one small JSON file each under ``<state root>/clusters/``, written before the
first namespace is made, so a cluster whose owner died (a killed test run) can be found and removed.

A cluster made by ``envmatrix cluster up`` is persistent (no owner: it stays until ``cluster down``); one made
by a library caller (tests) is owned by that process and reaped by the next cluster made after it died.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Optional

from envmatrix.network.state import owner_alive, process_start_time, state_root


@dataclass(frozen=True)
class ClusterRecord:
    name: str
    tag: str  # two hex digits: every namespace, bridge and veth name of the cluster carries it
    hosts: int
    subnet: str  # the first three octets, e.g. 10.231.7
    owner_pid: Optional[int]  # None: persistent
    owner_start: Optional[int]

    @property
    def persistent(self) -> bool:
        return self.owner_pid is None

    def owner_alive(self) -> bool:
        return self.persistent or owner_alive(self.owner_pid, self.owner_start)


def clusters_dir() -> Path:
    return state_root() / "clusters"


def record_path(tag: str) -> Path:
    return clusters_dir() / f"{tag}.json"


def files_dir(tag: str) -> Path:
    """The cluster's own files: the launcher's agent script, a hostfile."""
    return clusters_dir() / tag


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """Allocation of names, tags and subnets is atomic among concurrent envmatrix processes."""
    clusters_dir().mkdir(parents=True, exist_ok=True)
    with open(clusters_dir() / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def all_records() -> list[ClusterRecord]:
    found = []
    for path in sorted(clusters_dir().glob("*.json")) if clusters_dir().is_dir() else []:
        try:
            found.append(ClusterRecord(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return found


def write(record: ClusterRecord) -> None:
    clusters_dir().mkdir(parents=True, exist_ok=True)
    tmp = record_path(record.tag).with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(record)))
    os.replace(tmp, record_path(record.tag))


def remove(tag: str) -> None:
    record_path(tag).unlink(missing_ok=True)


def new_record(name: str, tag: str, hosts: int, subnet: str, persistent: bool) -> ClusterRecord:
    pid = None if persistent else os.getpid()
    return ClusterRecord(name, tag, hosts, subnet, pid, None if pid is None else process_start_time(pid))
