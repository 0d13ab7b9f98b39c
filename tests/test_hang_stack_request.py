"""The stack request at a timeout, on real processes: a launcher that does not pass SIGUSR1 on (as mpirun did
on the GPU box) still yields its rank's stack, because the driver signals a silent rank on this host directly
at the pid its progress report names; a pid whose environment names another run is never signalled."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from envmatrix.execution.hang import StackRequest, parse_stacks, where_stuck

PROBE = """
import faulthandler, json, os, signal, sys, time
rank, out = int(sys.argv[1]), sys.argv[2]
fh = open(os.path.join(out, f"rank{rank}.stack"), "w")
faulthandler.register(signal.SIGUSR1, file=fh, all_threads=True)
with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "pid": os.getpid(), "phase": "collectives"}, f)
def wedged():
    print("ready", flush=True)
    time.sleep(120)
wedged()
"""

# Ignores the stack request instead of passing it on, and keeps its rank running.
DEAF_LAUNCHER = """
import signal, subprocess, sys
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
child = subprocess.Popen(sys.argv[1:])
child.wait()
"""


def _start(tmp_path, rank, result_dir, launcher):
    env = {**os.environ, "ENVMATRIX_RESULT_DIR": str(result_dir)}
    argv = [sys.executable, "-c", PROBE, str(rank), str(tmp_path)]
    if launcher:
        argv = [sys.executable, "-c", DEAF_LAUNCHER, *argv]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.slow
def test_a_rank_behind_a_deaf_launcher_is_asked_directly(tmp_path):
    launcher = _start(tmp_path, 0, tmp_path, launcher=True)
    other_run = _start(tmp_path, 1, tmp_path / "another_run", launcher=False)  # same files, another run's env
    try:
        request = StackRequest(str(tmp_path), [0, 1], wait_s=3.0)
        started = time.monotonic()
        request([launcher.pid])
        waited = time.monotonic() - started
    finally:
        rank0 = json.loads((tmp_path / "rank0.json").read_text())["pid"]  # the launcher's child, by its own pid
        os.kill(rank0, signal.SIGKILL)
        for proc in (launcher, other_run):
            proc.kill()
            proc.wait()
    assert request.fired and request.direct == [0]
    collective, frame = where_stuck(parse_stacks((tmp_path / "rank0.stack").read_text()))
    assert collective is None and frame.func == "wedged"
    assert (tmp_path / "rank1.stack").read_text() == ""  # its environment names another run: not signalled
    assert waited >= 3.0, waited  # rank 1 never answers: the request waits its full wait_s, no longer
