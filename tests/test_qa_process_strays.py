"""QA of process cleanup with real processes: what a rank leaves outside its own tree, session and process group.

A daemon (a child in a session of its own, or fork-setsid-fork) that ignores SIGTERM is re-parented to init when its
rank exits: no tree, session or group kill of the rank reaches it. It must still not outlive the probe, under the
local launcher, under the real mpirun, and on a node the driver cannot see (the shim's own cleanup).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import assert_no_processes, processes_with_marker
from envmatrix.engine.launch import execute
from envmatrix.env import Setup
from envmatrix.launchers import get_launcher
from envmatrix.planning import Grid, plan_runs
from envmatrix.probes import get_probe

IGNORES_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
# its own session, then the rank passes at once
SETSID_CHILD = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {IGNORES_TERM!r}], start_new_session=True)"
# the classic daemon: fork, setsid, fork; the rank then fails
DAEMON = ("import os, sys, signal, time\n"
          "pid = os.fork()\n"
          "if pid == 0:\n"
          "    os.setsid()\n"
          "    if os.fork() == 0:\n"
          f"        os.execv(sys.executable, [sys.executable, '-c', {IGNORES_TERM!r}])\n"
          "    os._exit(0)\n"
          "os.waitpid(pid, 0)\n"
          "sys.exit(1)\n")


def _run(tmp_path: Path, launcher: str, code: str) -> tuple:
    marker = uuid.uuid4().hex
    env = {**os.environ, "ENVMATRIX_TEST_MARKER": marker, "PYTHONUNBUFFERED": "1"}
    probe = get_probe("command")
    spec = probe.spec({"command": [sys.executable, "-c", code], "timeout_s": 60, "grace_s": 2.0})
    run = plan_runs([Setup("strays")], [Grid(1, 2)], spec, "gloo", launcher)[0]
    cls = type(get_launcher(launcher))
    result = execute(run, cls() if launcher == "local" else cls(python=sys.executable), probe, str(tmp_path / "w"), env, {}, 0)
    return result, marker


def test_a_ranks_child_in_a_session_of_its_own_does_not_outlive_a_passed_run(tmp_path):
    result, marker = _run(tmp_path, "local", SETSID_CHILD)
    assert result.outcome == "pass", result.root_cause
    assert_no_processes(marker, wait_s=2)  # before: both sleepers ran on, parent 1, for their 300 s


@pytest.mark.slow  # mpirun's start and teardown take seconds
@pytest.mark.parametrize("launcher", ["local", "mpirun"])
def test_a_daemon_a_failing_rank_left_is_killed_under_each_launcher(tmp_path, launcher):
    if launcher == "mpirun" and shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed (.ci/run installs openmpi-bin)")
    result, marker = _run(tmp_path, launcher, DAEMON)
    assert result.outcome == "exit_error", result.root_cause
    assert_no_processes(marker, wait_s=2)


def test_the_shim_kills_its_ranks_daemon_on_a_node_the_driver_cannot_see_and_spares_the_other_rank(tmp_path):
    # the shim as mpirun starts it on another node: nothing of the driver's runs there, so the shim is all that cleans up
    marker = uuid.uuid4().hex
    base = {**os.environ, "ENVMATRIX_TEST_MARKER": marker, "ENVMATRIX_RESULT_DIR": str(tmp_path),
            "ENVMATRIX_LAUNCHER": "mpirun", "OMPI_COMM_WORLD_SIZE": "2", "ENVMATRIX_PPN": "2"}
    # rank 1 of the same run on the same node, started while rank 0 runs: same result dir, not rank 0's to kill
    other = subprocess.Popen([sys.executable, "-c", IGNORES_TERM],
                             env={**base, "RANK": "1"}, start_new_session=True)
    try:
        done = subprocess.run([sys.executable, "-m", "envmatrix.launchers.shim", "--", sys.executable, "-c", DAEMON],
                              env={**base, "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "0"},
                              timeout=60, capture_output=True, text=True)
        assert done.returncode == 1, done.stderr
        time.sleep(0.5)
        assert processes_with_marker(marker) == [other.pid]  # before: the daemon ran on beside it
    finally:
        other.kill()
        other.wait()
    assert_no_processes(marker, wait_s=2)


@pytest.mark.slow  # a real sweep, killed
@pytest.mark.parametrize("launcher", ["local", "mpirun"])
def test_a_driver_killed_with_sigkill_leaves_no_grandchild_behind(cli, tmp_path, launcher):
    # the ranks die of their death signal; before, under the local launcher, their children ran on (parent 1)
    if launcher == "mpirun" and shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed (.ci/run installs openmpi-bin)")
    code = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {IGNORES_TERM!r}]); time.sleep(300)"
    driver = cli.popen("sweep", "backend=gloo", "grids=[1x2]", f"launcher={launcher}", "probe=command",
                       f"probe.command=[{sys.executable},-c,\"{code}\"]", "--out", str(tmp_path / "o"), "--allow-unknown-vars")
    sleepers = []
    deadline = time.monotonic() + 60
    while len(sleepers) < 2 and time.monotonic() < deadline:
        sleepers = [pid for pid in processes_with_marker(cli.marker) if _cmdline(pid).endswith(IGNORES_TERM)]
        time.sleep(0.1)
    assert len(sleepers) == 2, "the ranks' children never started"
    driver.kill()
    driver.wait()
    assert_no_processes(cli.marker, wait_s=5)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().rstrip(b"\0").decode(errors="replace")
    except OSError:
        return ""
