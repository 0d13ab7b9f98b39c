"""kill -9 of a real gloo sweep at each kind of moment (mid-probe before any result, right after a result, once every
result is stored and the closing report is being written), then a resume: every (setup, grid) stored exactly once, no
process left, the matrix an uninterrupted sweep gives (a QA pass; held, no code change needed)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from conftest import assert_no_processes, write_conf

CONF = """
name: qa_kill
backend: gloo
grids: [1x2, 2x1]
setups:
  ok: {}
  detail: {TORCH_DISTRIBUTED_DEBUG: DETAIL}
  bad_if: {GLOO_SOCKET_IFNAME: envmx_missing0}
probe: {timeout_s: 60, collectives: [allreduce]}
"""
RUNS = 6


def _stored(out: Path) -> list[tuple[str, int]]:
    try:
        with sqlite3.connect(out / "results.sqlite") as db:
            return db.execute("SELECT run_key, attempt FROM results ORDER BY seq").fetchall()
    except sqlite3.OperationalError:
        return []


def _kill_when(cli, out: Path, args: tuple, ready, what: str) -> None:
    driver = cli.popen(*args)
    deadline = time.time() + 120
    while time.time() < deadline and driver.poll() is None and not ready():
        time.sleep(0.02)
    assert driver.poll() is None, f"the sweep ended before {what}: {driver.communicate()[0][-2000:]}"
    os.kill(driver.pid, signal.SIGKILL)
    driver.communicate(timeout=30)
    assert_no_processes(cli.marker)  # ranks and pool servers die with the driver (PDEATHSIG)
    with sqlite3.connect(out / "results.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.slow
def test_kill_9_at_every_kind_of_moment_then_resume_stores_each_run_once(cli, tmp_path):
    conf = write_conf(tmp_path / "c.yaml", CONF)
    reference = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "ref"))
    assert reference.returncode == 1, reference.stdout + reference.stderr
    out = tmp_path / "o"
    args = ("sweep", f"conf={conf}", "--out", str(out))

    _kill_when(cli, out, args, lambda: any(out.glob("logs/*/*/rank1.log")), "its first run's ranks started")
    assert _stored(out) == []
    _kill_when(cli, out, args, lambda: len(_stored(out)) >= 1, "its first result")
    after_one = _stored(out)
    assert 1 <= len(after_one) < RUNS
    _kill_when(cli, out, args, lambda: len(_stored(out)) == RUNS, "its last result")
    assert _stored(out)[: len(after_one)] == after_one  # nothing committed is lost or rewritten

    resumed = cli.run(*args)
    assert resumed.returncode == 1 and f"{RUNS} already in the store" in resumed.stdout, resumed.stdout + resumed.stderr
    keys = [key for key, _ in _stored(out)]
    assert len(keys) == RUNS and len(set(keys)) == RUNS and {a for _, a in _stored(out)} == {1}
    matrix = json.loads((out / "results.json").read_text())["matrix"]
    assert matrix == json.loads((tmp_path / "ref" / "results.json").read_text())["matrix"]
    assert all(row == {"ok": "1", "detail": "1", "bad_if": "0"} for row in matrix.values()), matrix
    assert_no_processes(cli.marker)


@pytest.mark.slow
def test_kill_9_of_the_driver_leaves_no_child_of_a_rank(cli, tmp_path):
    import sys

    conf = write_conf(tmp_path / "c.yaml", f"""
backend: gloo
grids: [1x1]
setups: {{a: {{QA_V: a}}}}
probe:
  name: command
  timeout_s: 60
  command: [{sys.executable}, -c, "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(60)"]
""")
    out = tmp_path / "o"
    try:
        _kill_when(cli, out, ("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars"),
                   lambda: len([p for p in _children_named(cli.marker, b"sleep")]) == 1, "the rank's child started")
    finally:
        for pid in _children_named(cli.marker, b"sleep"):
            os.kill(pid, signal.SIGKILL)


def _children_named(marker: str, name: bytes) -> list[int]:
    from conftest import processes_with_marker

    found = []
    for pid in processes_with_marker(marker):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if fh.read().split(b"\0")[0] == name:
                    found.append(pid)
        except OSError:
            pass
    return found
