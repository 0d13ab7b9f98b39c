"""At a timeout the driver ends every process of a run before it reaps any. Ended one tree after another (kill, reap,
then the next), a rank under the second launcher saw the first launcher gone and failed of it before its own kill:
under torchrun that rank's own exit line made a hang read as a collective error (CI run 90; 43dc906 read that line
back as the driver's timeout, this closes the window itself). Real processes: B's rank watches A's pid without
pause; a killed, unreaped A is a zombie, which still answers kill(pid, 0)."""

from __future__ import annotations

import os
import sys
import uuid

import pytest

from conftest import assert_no_processes
from envmatrix.boundary import ProcessSpec
from envmatrix.execution.processes import run_group

LAUNCHER_A = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(300)"
RANK_UNDER_B = """
import os, sys, time
pid_file, saw = sys.argv[1], sys.argv[2]
while not os.path.exists(pid_file) or not open(pid_file).read():
    time.sleep(0.01)
a = int(open(pid_file).read())
while True:
    try:
        os.kill(a, 0)
    except ProcessLookupError:
        open(saw, 'w').write('launcher A was gone while this rank still ran')
        sys.exit(1)
"""
LAUNCHER_B = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1], *sys.argv[2:]]); time.sleep(300)"


@pytest.mark.slow  # waits out a 3 s deadline
def test_at_the_deadline_no_rank_outlives_another_launcher(tmp_path):
    marker = uuid.uuid4().hex
    env = {**os.environ, "ENVMATRIX_TEST_MARKER": marker}
    pid_file, saw = tmp_path / "a.pid", tmp_path / "saw"
    specs = [ProcessSpec((sys.executable, "-c", LAUNCHER_A, str(pid_file)), env, str(tmp_path / "a.log"), "a"),
             ProcessSpec((sys.executable, "-c", LAUNCHER_B, RANK_UNDER_B, str(pid_file), str(saw)), env,
                         str(tmp_path / "b.log"), "b")]
    out = run_group(specs, timeout_s=3.0)
    assert [o.killed_by for o in out] == ["timeout", "timeout"], out
    assert pid_file.exists(), (tmp_path / "a.log").read_text()  # A ran, so B's rank watched it
    assert not saw.exists(), saw.read_text()
    assert_no_processes(marker)
