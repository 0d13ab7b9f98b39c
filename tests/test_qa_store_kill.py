"""kill -9 of a real gloo sweep at each kind of moment (a run finished but not yet stored, right after a result, once
every result is stored, as the closing report begins), then a resume: every (setup, grid) stored exactly once, no
process left, the matrix an uninterrupted sweep gives (a QA pass; held, no code change needed).

Each moment is made to hold still: the driver runs under a wrapper that, at that moment, marks a file and sleeps until
the kill. Polling the store or the logs for them raced the sweep: once the warm pool has imported torch a run takes
about 0.1 s, the closing report about 0.15 s, so a poller that lost the CPU for a moment (CI run 93, 4 xdist workers
on 2 cores) killed a sweep that had already stored every run; with a 0.5 s poll the kill meant to come before any
result came after four."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import subprocess
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

# The real driver, held at one moment: after its Nth stored result ("put:N"; "put:0": its first run finished, before
# it is stored) or as the closing report begins ("report"). It marks QA_HELD and sleeps there; only the driver runs it
# (ranks are started by the driver as before).
HOLDING_DRIVER = """
import os, sys, time
moment, held = os.environ["QA_HOLD_AT"], os.environ["QA_HELD"]

def hold():
    open(held, "w").close()
    time.sleep(3600)

if moment.startswith("put:"):
    from envmatrix.store.sqlite import SqliteStore
    put, puts = SqliteStore.put, [int(moment[4:])]

    def put_then_hold(self, result):
        if puts[0] == 0:
            hold()
        attempt = put(self, result)
        puts[0] -= 1
        if puts[0] == 0:
            hold()
        return attempt
    SqliteStore.put = put_then_hold
else:
    import envmatrix.reporting as reporting
    write_reports = reporting.write_reports

    def hold_then_write(*args, **kwargs):
        hold()
        return write_reports(*args, **kwargs)
    reporting.write_reports = hold_then_write

from envmatrix.__main__ import entry
sys.exit(entry())
"""


def _stored(out: Path) -> list[tuple[str, int]]:
    try:
        with sqlite3.connect(out / "results.sqlite") as db:
            return db.execute("SELECT run_key, attempt FROM results ORDER BY seq").fetchall()
    except sqlite3.OperationalError:
        return []


def _kill_when(cli, out: Path, args: tuple, ready, what: str, driver: subprocess.Popen | None = None) -> None:
    driver = driver or cli.popen(*args)
    deadline = time.time() + 120
    while time.time() < deadline and driver.poll() is None and not ready():
        time.sleep(0.02)
    assert driver.poll() is None, f"the sweep ended before {what}: {driver.communicate()[0][-2000:]}"
    os.kill(driver.pid, signal.SIGKILL)
    driver.communicate(timeout=30)
    assert_no_processes(cli.marker)  # ranks and pool servers die with the driver (PDEATHSIG)
    with sqlite3.connect(out / "results.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _kill_held(cli, tmp_path: Path, out: Path, args: tuple, moment: str, what: str) -> None:
    script, held = tmp_path / "holding_driver.py", tmp_path / f"held_{moment.replace(':', '_')}"
    script.write_text(HOLDING_DRIVER)
    env = {**cli.env, "QA_HOLD_AT": moment, "QA_HELD": str(held)}
    driver = subprocess.Popen([sys.executable, str(script), *args], cwd=cli.cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    _kill_when(cli, out, args, held.exists, what, driver)


@pytest.mark.slow
def test_kill_9_at_every_kind_of_moment_then_resume_stores_each_run_once(cli, tmp_path):
    conf = write_conf(tmp_path / "c.yaml", CONF)
    reference = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "ref"))
    assert reference.returncode == 1, reference.stdout + reference.stderr
    out = tmp_path / "o"
    args = ("sweep", f"conf={conf}", "--out", str(out))

    _kill_held(cli, tmp_path, out, args, "put:0", "its first run finished")
    assert _stored(out) == [] and len(list(out.glob("logs/*/*/rank1.log"))) == 1
    _kill_held(cli, tmp_path, out, args, "put:1", "its first result")
    after_one = _stored(out)
    assert len(after_one) == 1
    _kill_held(cli, tmp_path, out, args, f"put:{RUNS - 1}", "its last result")
    every_run = _stored(out)
    assert len(every_run) == RUNS and every_run[:1] == after_one  # nothing committed is lost or rewritten
    assert not (out / "results.json").exists()  # the kill came before the closing report
    _kill_held(cli, tmp_path, out, args, "report", "its closing report")  # a resume that only reports, killed there
    assert _stored(out) == every_run

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
