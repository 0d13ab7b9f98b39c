"""Shared helpers: run the real CLI as a subprocess and prove no child is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def processes_with_marker(marker: str) -> list[int]:
    """PIDs whose environment carries ``ENVMATRIX_TEST_MARKER=marker`` (ranks inherit it)."""
    needle = f"ENVMATRIX_TEST_MARKER={marker}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def assert_no_processes(marker: str, wait_s: float = 5.0) -> None:
    deadline = time.time() + wait_s
    while processes_with_marker(marker) and time.time() < deadline:
        time.sleep(0.1)
    left = processes_with_marker(marker)
    assert not left, f"processes left behind: {[_describe(pid) for pid in left]}"


def _describe(pid: int) -> str:
    """pid, state, parent and command line: which process was left says which cleanup missed it."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        return f"{pid} {fields[0]} ppid {fields[1]} pgid {fields[2]}: {cmd[:160]}"
    except OSError:
        return f"{pid} (gone)"


class Cli:
    def __init__(self, tmp_path: Path) -> None:
        self.marker = uuid.uuid4().hex
        self.env = {**os.environ, "ENVMATRIX_TEST_MARKER": self.marker, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
        self.cwd = tmp_path

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "envmatrix", *args]

    def run(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*args), cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=timeout)

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(self.argv(*args), cwd=self.cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def write_conf(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
