"""QA of per-rank results and the root cause with real ranks under the real mpirun (and the local launcher alike).

One launcher process hosts every rank under mpirun, so its exit status says little of each rank: the first observed
failure must still be the root cause, a rank that passed must read as passed (not as stopped, not as hung), and a run
killed at its timeout must blame the rank that hung, not the lowest rank.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid

import pytest

from conftest import assert_no_processes
from envmatrix.engine.launch import execute
from envmatrix.env import Setup
from envmatrix.launchers import get_launcher
from envmatrix.launchers.rank_exits import RankExit, account_of, rank_outcome, shim, shim_exit_line
from envmatrix.boundary import ProcessOutcome
from envmatrix.planning import Grid, plan_runs
from envmatrix.probes import get_probe

RANK = "import os, sys, time; r = int(os.environ['RANK']); "
# Rank 2 of the 2x2 run exits only after ranks 0 and 1 have: with all three "at once", a loaded host started rank 0
# after rank 2 had failed and mpirun had stopped the job (CI run 94: rank 0 peer_killed, as it was). A rank that has
# exited is a zombie until its shim (or the launcher) reaps it and reports; the second after leaves the shim its line.
AFTER_RANKS_0_AND_1 = """
d = os.environ['ENVMATRIX_RESULT_DIR']
r < 2 and open(f'{d}/qa_rank{r}.pid', 'w').write(str(os.getpid()))
def ended(i):
    try:
        pid = int(open(f'{d}/qa_rank{i}.pid').read())
    except (OSError, ValueError):
        return False
    try:
        return open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] in ('Z', 'X')
    except OSError:
        return True
while r == 2 and not (ended(0) and ended(1)):
    time.sleep(0.05)
r == 2 and time.sleep(1.0)
"""
LAUNCHERS = ["local", pytest.param("mpirun", marks=pytest.mark.skipif(shutil.which("mpirun") is None,
                                                                     reason="mpirun is not installed"))]


def _run(tmp_path, launcher: str, code: str, timeout_s: float = 60, grid: Grid = Grid(1, 2)):
    marker = uuid.uuid4().hex
    env = {**os.environ, "ENVMATRIX_TEST_MARKER": marker, "PYTHONUNBUFFERED": "1"}
    probe = get_probe("command")
    spec = probe.spec({"command": [sys.executable, "-c", RANK + code], "timeout_s": timeout_s, "grace_s": 2.0})
    run = plan_runs([Setup("qa")], [grid], spec, "gloo", launcher)[0]
    cls = type(get_launcher(launcher))
    result = execute(run, cls() if launcher == "local" else cls(python=sys.executable), probe, str(tmp_path / "w"), env, {}, 0)
    assert_no_processes(marker, wait_s=3)
    return result, {r.rank: r for r in result.ranks}


@pytest.mark.slow  # waits out a 4 s timeout
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_run_where_one_rank_hangs_blames_that_rank_and_the_one_that_passed_passed(tmp_path, launcher):
    # before, under mpirun: the timeout was mpirun's, every rank 'timeout', and the root cause rank 0, which had passed
    result, ranks = _run(tmp_path, launcher, "r == 1 and time.sleep(300)", timeout_s=4)
    assert result.outcome == "timeout" and result.root_cause["rank"] == 1, result.root_cause
    assert ranks[0].outcome == "pass" and ranks[1].outcome == "timeout", (ranks[0], ranks[1])


@pytest.mark.slow  # mpirun's start and teardown
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_rank_that_failed_while_another_hangs_is_the_root_cause_and_the_ranks_that_passed_passed(tmp_path, launcher):
    # 2x2: rank 2 exits 3 once 0 and 1 have passed; rank 3 hangs. Under mpirun an exit code stops the job, under
    # the local launcher the grace period does: either way rank 2 is the cause, and 0 and 1 passed
    result, ranks = _run(tmp_path, launcher, AFTER_RANKS_0_AND_1 + "r == 2 and sys.exit(3); r == 3 and time.sleep(300)",
                         timeout_s=30, grid=Grid(2, 2))
    assert result.outcome == "exit_error" and result.root_cause["rank"] == 2, result.root_cause
    assert (ranks[0].outcome, ranks[1].outcome, ranks[3].outcome) == ("pass", "pass", "peer_killed"), result.ranks
    assert ranks[2].exit_code == 3 and ranks[3].exit_code is None, (ranks[2], ranks[3])  # not mpirun's 3 for rank 3 too


def test_the_shims_word_is_read_back_and_only_it_outlasts_the_drivers_kill():
    said = "\n".join([shim_exit_line(0, "n1", 0, None), "noise", shim_exit_line(2, "n2", None, "SIGSEGV")])
    assert shim(said, "mpirun") == [RankExit(0, 0, None, "n1", "mpirun", True), RankExit(2, None, "SIGSEGV", "n2", "mpirun", True)]
    killed = ProcessOutcome("mpirun", 7, None, "SIGKILL", "timeout", 100.0)
    account = account_of(shim(said, "mpirun") + [RankExit(3, 1, None, "n2", "mpirun")])
    assert rank_outcome(killed, 0, account, False).killed_by is None  # passed before the kill
    assert rank_outcome(killed, 2, account, False).signal == "SIGSEGV"
    assert rank_outcome(killed, 1, account, False) == killed  # said nothing: hung until the kill
    assert rank_outcome(killed, 3, account, False) == killed  # the launcher's account does not outlast the kill
    # a SIGKILL the shim saw may be the driver's own kill reaching the probe first
    late = account_of(shim(shim_exit_line(1, "n1", None, "SIGKILL"), "mpirun"))
    assert rank_outcome(killed, 1, late, False) == killed
