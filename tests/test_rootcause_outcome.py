from envmatrix.probes.outcome import verdict
from envmatrix.probes.rootcause import root_cause_line
from envmatrix.results import RankResult

# Shapes of torch/NCCL failure text (torch.distributed.DistBackendError message layout).
NCCL_INVALID_USAGE = """Traceback (most recent call last):
  File "envmatrix/rank/main.py", line 120, in main
torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:94, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9
ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
Last error:
Error: network AWS Libfabric not found.
"""

NCCL_WARN_LOG = """host:123:456 [0] NCCL INFO Bootstrap: Using lo:127.0.0.1<0>
host:123:456 [0] init.cc:1234 NCCL WARN Error: network AWS Libfabric not found.
"""

GLOO = "RuntimeError: [enforce fail at device.cc:84] ifa != nullptr. Unable to find address for: envmx_missing0"


def test_last_error_line_wins():
    assert root_cause_line(NCCL_INVALID_USAGE) == "Error: network AWS Libfabric not found."


def test_nccl_warn_line():
    assert root_cause_line("noise\n" + NCCL_WARN_LOG) == "Error: network AWS Libfabric not found."


def test_exception_line():
    assert root_cause_line("Traceback...\n  File x\n" + GLOO + "\n") == GLOO


def test_empty():
    assert root_cause_line(None, "") is None


def _rank(rank, outcome, ended, line=None):
    return RankResult(rank=rank, outcome=outcome, ended_at=ended, root_cause_line=line, error=line)


def test_verdict_first_observed_failure_is_root_cause():
    ranks = [_rank(0, "peer_killed", 5.0), _rank(1, "collective_error", 3.0, "late"), _rank(2, "init_error", 1.0, "first")]
    outcome, cause = verdict(ranks)
    assert outcome == "init_error" and cause["rank"] == 2 and cause["line"] == "first"


def test_verdict_all_pass_and_all_timeout():
    assert verdict([_rank(0, "pass", 1), _rank(1, "pass", 1)]) == ("pass", {})
    outcome, cause = verdict([_rank(1, "timeout", 9), _rank(0, "timeout", 9)])
    assert outcome == "timeout" and cause["rank"] == 0


def test_verdict_prefers_real_failure_over_timeouts():
    outcome, cause = verdict([_rank(0, "timeout", 9), _rank(1, "crash", 9.5, "died on SIGSEGV")])
    assert outcome == "crash" and cause["rank"] == 1


# ---------------------------------------------------------------------------- the launcher's account of failed ranks
# Recorded with the real launchers here (tests/data/launcher_failures/record_rank1_fault.py: rank 1 exits 3 or dies
# of SIGSEGV, rank 0 sleeps): OpenMPI 4.1.4 mpirun -np 2, Slurm srun -n2 --kill-on-bad-exit=1, torchrun 2.13 --nproc-per-node=2.

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from envmatrix.execution.processes import ProcessOutcome  # noqa: E402
from envmatrix.launchers.rank_exits import RankExit, account_of, rank_exits, rank_outcome  # noqa: E402

RECORDED = Path(__file__).parent / "data" / "launcher_failures"


@pytest.mark.parametrize("launcher,stem,first", [
    ("mpirun", "openmpi_rank1_exit", RankExit(1, 3, None, None, "mpirun")),
    ("mpirun", "openmpi_rank1_segv", RankExit(1, None, "SIGSEGV", "vm", "mpirun")),
    ("srun", "srun_rank1_exit", RankExit(1, 3, None, "vm", "srun")),
    ("srun", "srun_rank1_segv", RankExit(1, None, "SIGSEGV", "vm", "srun")),
    ("torchrun", "torchrun_rank1_exit", RankExit(1, 3, None, "localhost", "torchrun")),
    ("torchrun", "torchrun_rank1_segv", RankExit(1, None, "SIGSEGV", "localhost", "torchrun")),
])
def test_launcher_names_the_failed_rank_first(launcher, stem, first):
    exits = rank_exits(launcher, (RECORDED / f"{stem}.txt").read_text())
    assert exits[0] == first
    # srun and torch elastic then list the rank they stopped (SIGTERM); mpirun names only the first
    assert [e.rank for e in exits[1:]] == ([] if launcher == "mpirun" else [0])
    assert all(e.signal == "SIGTERM" for e in exits[1:])


def test_launch_failures_and_other_launchers_name_no_rank():
    assert rank_exits("mpirun", (RECORDED / "openmpi_unknown_host.txt").read_text()) == []
    assert rank_exits("srun", "srun: error: Unable to create step for job 7: Invalid generic resource (gres) specification") == []
    assert rank_exits("local", "anything") == []


def test_srun_task_ranges():
    exits = rank_exits("srun", "srun: error: n2: tasks 2-3,5: Exited with exit code 1\nsrun: error: n1: task 0: Killed\n")
    assert [(e.rank, e.exit_code, e.signal, e.host) for e in exits] == [
        (2, 1, None, "n2"), (3, 1, None, "n2"), (5, 1, None, "n2"), (0, None, "SIGKILL", "n1")]


def _hosting(**kw):
    return ProcessOutcome(**{"label": "mpirun", "pid": 7, "exit_code": 3, "signal": None, "killed_by": None,
                             "ended_at": 100.0, **kw})


def test_rank_outcome_combines_the_account_with_the_ranks_own_records():
    account = account_of(rank_exits("srun", (RECORDED / "srun_rank1_segv.txt").read_text()))
    hosting = _hosting(exit_code=None, signal="SIGSEGV")
    first = rank_outcome(hosting, 1, account, has_verdict=False)
    assert (first.signal, first.exit_code, first.killed_by) == ("SIGSEGV", None, None)
    stopped = rank_outcome(hosting, 0, account, has_verdict=False)  # srun's SIGTERM after rank 1 failed
    assert stopped.killed_by == "peer_failure" and stopped.ended_at > first.ended_at
    # a rank with its own verdict is not judged by its launcher's exit status
    assert rank_outcome(hosting, 2, account, has_verdict=True).signal is None
    assert rank_outcome(hosting, 2, account, has_verdict=False).killed_by == "peer_failure"
    # the driver's own kill and an empty account leave the hosting outcome alone
    assert rank_outcome(_hosting(killed_by="timeout"), 1, account, False).killed_by == "timeout"
    assert rank_outcome(hosting, 1, {}, False) is hosting


def test_verdict_names_the_host():
    ranks = [_rank(0, "peer_killed", 5.0), RankResult(rank=1, outcome="crash", ended_at=5.0, error="x", hostname="n7")]
    assert verdict(ranks)[1]["host"] == "n7"
