"""A rank alive at the driver's deadline is a timeout, even when it ends by itself while the driver kills the
launchers one after another.

CI run 90, tests/test_hang_diagnosis.py's torchrun case (2x2, rank 1 stalls before allgather, timeout 60 s): at
the deadline the driver asked every rank for its stack, then killed torchrun0's tree (ranks 0, 1) and reaped it
before it killed torchrun1's. In between, rank 3 (under torchrun1) saw its peers die, gloo raised "Connection
closed by peer" out of the allgather it was waiting in, and it exited 1 by itself (its own clock: 0.07 s before
ranks 0-1 were reaped, 0.15 s before rank 2 was killed); its shim said so, and rank_outcome took the shim's word
as an end before the kill: the run was a collective_error, not the timeout it was. Below: torchrun1.log as it was.
"""

from envmatrix.boundary import ProcessOutcome
from envmatrix.launchers.rank_exits import account_of, rank_outcome, shim, shim_exit_line, shim_stack_request_line
from envmatrix.probes import get_probe
from envmatrix.probes.outcome import verdict
from envmatrix.results import RankResult, TIMEOUT

TORCHRUN1_LOG = """
*****************************************
Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being \
overloaded, please further tune the variable for optimal performance in your application as needed.
*****************************************
envmatrix shim: passing signal 10 (stack request) to probe pid 29950
envmatrix shim: passing signal 10 (stack request) to probe pid 29947
envmatrix shim: rank 3 on host vm: probe exited with code 1
"""
GLOO = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by "
        "peer [127.0.0.1]:19152. This is typically caused by a remote worker crashing.")
RANK3_REPORT = {"phase": "collectives", "outcome": "collective_error", "error": GLOO, "failed_at": 1795737927.3944464,
                "progress": {"collective": "allgather", "seq": 2, "since": 1795737872.9481483}, "hostname": "vm"}
KILLED = ProcessOutcome("torchrun1", 29940, None, "SIGKILL", "timeout", 1795737927.54471)


def test_run_90s_rank_3_ended_during_the_kill_and_is_a_timeout():
    process = rank_outcome(KILLED, 3, account_of(shim(TORCHRUN1_LOG, "torchrun")), has_verdict=True)
    assert process.killed_by == "timeout"
    rank3 = get_probe("builtin").interpret(RankResult(rank=3, node=1, local_rank=1), process, RANK3_REPORT, GLOO)
    assert rank3.outcome == TIMEOUT and rank3.killed_by == "timeout"
    others = [RankResult(rank=r, outcome=TIMEOUT, killed_by="timeout") for r in (0, 1, 2)]
    outcome, cause = verdict(others + [rank3])
    assert outcome == TIMEOUT and cause["rank"] == 0  # the hang diagnosis then names rank 1, as on other launchers


def test_a_rank_that_ended_before_the_deadline_keeps_its_own_end():
    # what 76bc724 made the shim's word for: a rank that passed (or failed) before the deadline, its launcher
    # killed later at the timeout for another rank's hang
    text = ("envmatrix shim: rank 2 on host vm: probe exited with code 0\n"
            "envmatrix shim: passing signal 10 (stack request) to probe pid 29950\n")
    process = rank_outcome(KILLED, 2, account_of(shim(text, "torchrun")), has_verdict=True)
    assert (process.killed_by, process.exit_code, process.signal) == (None, 0, None)
    before = shim(text, "torchrun")
    assert [(e.rank, e.after_stack_request) for e in before] == [(2, False)]


def test_the_lines_the_shim_writes_are_the_ones_read_back():
    text = f"{shim_stack_request_line(10, 29950)}\n{shim_exit_line(3, 'vm', 1, None)}\n"
    assert [(e.rank, e.exit_code, e.after_stack_request) for e in shim(text, "torchrun")] == [(3, 1, True)]
