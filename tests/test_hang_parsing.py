"""Hang diagnosis, pure parts: faulthandler dumps (taken from a real process), the one-line summary,
and NCCL RAS's client exchange against a loopback server that speaks its side of the protocol."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

from pathlib import Path

from envmatrix.execution.hang import (RAS_PORT, diagnose, nccl_tail, parse_stacks, query_ras, ras_address,
                                      ras_operation_counts, ras_summary, where_stuck)
from envmatrix.results import RankResult

DATA = Path(__file__).parent / "data"

# A rank blocked in torch.distributed's all_reduce, as faulthandler prints it (paths as on any install).
BLOCKED_IN_ALLREDUCE = """Thread 0x00007f2a1c5fe6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 331 in wait
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f2a2d0a1740 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2806 in all_reduce
  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 81 in wrapper
  File "/src/envmatrix/rank/main.py", line 108 in run_checks
  File "/src/envmatrix/rank/main.py", line 196 in main
  File "<frozen runpy>", line 88 in _run_code
"""


def test_real_faulthandler_dump_is_parsed(tmp_path):
    """A real process registers faulthandler on SIGUSR1 and blocks; the dump names its frames."""
    out = tmp_path / "stack"
    code = (
        "import faulthandler, signal, sys, time\n"
        f"fh = open({str(out)!r}, 'w'); faulthandler.register(signal.SIGUSR1, file=fh, all_threads=True)\n"
        "def wedged():\n    print('ready', flush=True); time.sleep(60)\n"
        "wedged()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGUSR1)
        deadline = time.time() + 20
        while time.time() < deadline and not out.read_text():
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    threads = parse_stacks(out.read_text())
    assert len(threads) == 1 and [f.func for f in threads[0]] == ["wedged", "<module>"]
    collective, frame = where_stuck(threads)
    assert collective is None and frame.short() == "<string>:4 in wedged"  # line 4: the sleep inside wedged()


def test_collective_found_under_torch_frames():
    collective, frame = where_stuck(parse_stacks(BLOCKED_IN_ALLREDUCE))
    assert collective == "allreduce" and frame.short() == "rank/main.py:108 in run_checks"


def _rank(r, host, seq, collective="allreduce", alive=True):
    return RankResult(rank=r, hostname=host, killed_by="timeout" if alive else None,
                      progress={"collective": collective, "seq": seq})


def test_laggard_rank_is_named_with_host_and_sequence():
    ranks = [_rank(0, "h1", 17), _rank(1, "h1", 17), _rank(2, "h2", 17), _rank(3, "h2", 16)]
    stacks = {r: BLOCKED_IN_ALLREDUCE for r in range(4)}
    block = diagnose(ranks, stacks, {3: "x\nh2:1:1 [0] NCCL INFO last line\n"})
    assert block["line"] == "rank 3 on host h2 stuck in allreduce (seq 16); ranks 0-2 wait in allreduce (seq 17)"
    assert block["ranks"]["3"]["nccl_tail"] == ["h2:1:1 [0] NCCL INFO last line"]


def test_same_place_everywhere_names_the_lowest_rank_and_finished_ranks():
    ranks = [_rank(0, "h1", 5), _rank(1, "h1", 5, alive=False), _rank(2, "h2", 5)]
    line = diagnose(ranks, {0: BLOCKED_IN_ALLREDUCE, 2: BLOCKED_IN_ALLREDUCE}, {})["line"]
    assert line == "rank 0 on host h1 stuck in allreduce (seq 5); rank 2 wait in allreduce (seq 5); rank 1 no longer running"


def test_no_stack_answered_is_said():
    line = diagnose([_rank(0, "h1", 2), _rank(1, "h1", 2)], {}, {})["line"]
    assert line.endswith("no rank answered the stack request") and line.startswith("rank 0 on host h1 stuck in allreduce (seq 2)")


def test_nccl_tail_keeps_the_last_nccl_lines():
    log = "\n".join([f"h:1:1 [0] NCCL INFO line {i}" for i in range(20)] + ["Traceback ..."])
    assert nccl_tail(log, 3) == [f"h:1:1 [0] NCCL INFO line {i}" for i in (17, 18, 19)]


# NCCL 2.28.9's RAS answer to STATUS on the 2xH200 box (benchmarks/h200x2_hang_topo.sh, local launcher): rank 1 stalled
# before its allgather (probe.stall), rank 0 had launched it.
RAS_STATUS = (DATA / "nccl_ras" / "status_2.28.9.txt").read_text()


def test_ras_summary_reads_errors_and_warnings():
    assert ras_summary(RAS_STATUS) == (
        "#0-0 (37a1b2eba937da59) MISMATCH: Communicator ranks have different AllGather operation counts "
        "Rank 0 has launched up to operation 1 -- GPU 0 managed by process 860 on node 127.0.0.1 "
        "Rank 1 has not launched any operations -- GPU 1 managed by process 862 on node 127.0.0.1")
    assert ras_summary("Job summary\n===========\n\nErrors\n======\n\nWarnings\n========\n") is None


def test_ras_operation_counts_of_the_mismatched_communicator():
    assert ras_operation_counts(RAS_STATUS) == {0: 1, 1: 0}
    assert ras_operation_counts(RAS_STATUS.replace("MISMATCH", "OK")) == {}  # counts only of a reported mismatch
    assert ras_operation_counts("") == {}


def test_ras_address_default_and_override():
    assert ras_address({}) == ("127.0.0.1", RAS_PORT)
    assert ras_address({"NCCL_RAS_ADDR": "localhost:30001"}) == ("localhost", 30001)


def _ras_server(replies):
    """A loopback listener that answers as NCCL's RAS thread does (the process boundary the client crosses)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    seen = []

    def serve():
        conn, _ = server.accept()
        with conn, conn.makefile("rb") as reader:
            for reply in replies:
                seen.append(reader.readline().decode().strip())
                conn.sendall(reply.encode())
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1], seen


def test_query_ras_speaks_the_client_protocol():
    port, seen = _ras_server(["SERVER PROTOCOL 2\n", "OK\n", RAS_STATUS])
    assert query_ras("127.0.0.1", port, timeout_s=5) == RAS_STATUS
    assert seen == ["CLIENT PROTOCOL 2", "TIMEOUT 5", "STATUS"]


def test_query_ras_gives_none_when_nothing_or_something_else_answers():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    assert query_ras("127.0.0.1", closed, timeout_s=1) is None
    port, _ = _ras_server(["HTTP/1.1 400 Bad Request\n"])
    assert query_ras("127.0.0.1", port, timeout_s=2) is None


def test_stall_and_topology_params_are_checked():
    import pytest

    from envmatrix.errors import ConfigError
    from envmatrix.probes.base import get_probe

    probe = get_probe("builtin")
    assert probe.spec({"stall": {"rank": 1, "seq": 2}}).params["stall"] == {"rank": 1, "seq": 2}
    assert probe.spec({"stall": {"rank": 0, "seq": 0}}).params["stall"] == {"rank": 0, "seq": 0}  # before init
    for bad in ({"rank": 1}, {"rank": -1, "seq": 1}, {"rank": 0, "seq": -1}, {"rank": True, "seq": 1}, "1:2"):
        with pytest.raises(ConfigError, match=r"^probe.stall: .* not allowed; allowed: null or \{rank: R >= 0, seq: N >= 0\}$"):
            probe.spec({"stall": bad})
    with pytest.raises(ConfigError, match="^probe.nccl_dump_topology: 'yes' not allowed; allowed: true, false$"):
        probe.spec({"nccl_dump_topology": "yes"})
    assert probe.spec({"async_op": True}).params["async_op"] is True
    with pytest.raises(ConfigError, match="^probe.async_op: 1 not allowed; allowed: true, false$"):
        probe.spec({"async_op": 1})
    assert probe.spec({}).params["teardown"] == "destroy"  # a destroy that hangs or fails is seen by default
    assert probe.spec({"teardown": "exit"}).params["teardown"] == "exit"
    with pytest.raises(ConfigError, match="^probe.teardown: 'skip' not allowed; allowed: destroy, exit$"):
        probe.spec({"teardown": "skip"})


BLOCKED_IN_INIT = BLOCKED_IN_ALLREDUCE.replace("line 2806 in all_reduce", "line 1710 in init_process_group")


def test_a_rank_that_cannot_answer_is_the_culprit():
    """A SIGSTOPped rank runs no signal handler: its peers answer from the rendezvous it never joined."""
    stopped = RankResult(rank=1, hostname="node1", killed_by="timeout", phase="import")
    waiting = [RankResult(rank=r, hostname=f"node{r}", killed_by="timeout", phase="init") for r in (0, 2)]
    line = diagnose([waiting[0], stopped, waiting[1]], {0: BLOCKED_IN_INIT, 2: BLOCKED_IN_INIT}, {})["line"]
    assert line == ("rank 1 on host node1 did not answer the stack request (stopped, or wedged outside Python) in "
                    "phase import; ranks 0,2 wait in init_process_group (rendezvous)")


def test_the_block_names_the_culprit_rank_and_host_for_the_root_cause():
    # docs/hang-diagnosis.md: each failure gets the host of its root-cause rank; for a hang that is the culprit the
    # line names (node1 here), not the lowest rank
    stopped = RankResult(rank=1, hostname="node1", killed_by="timeout", phase="import")
    waiting = [RankResult(rank=r, hostname=f"node{r}", killed_by="timeout", phase="init") for r in (0, 2)]
    block = diagnose([waiting[0], stopped, waiting[1]], {0: BLOCKED_IN_INIT, 2: BLOCKED_IN_INIT}, {})
    assert block["culprit"] == {"rank": 1, "host": "node1"}


def test_bench_marker_names_the_size():
    ranks = [RankResult(rank=r, hostname="h", killed_by="timeout", progress={"collective": "allreduce@1048576", "seq": 9})
             for r in range(2)]
    line = diagnose(ranks, {0: BLOCKED_IN_ALLREDUCE, 1: BLOCKED_IN_ALLREDUCE}, {})["line"]
    assert line == "rank 0 on host h stuck in allreduce@1048576 (seq 9); rank 1 wait in allreduce@1048576 (seq 9)"


# NCCL collectives are asynchronous: a rank whose peer skipped one blocks in the next CUDA sync, not in all_gather.
BLOCKED_IN_CUDA_SYNC = BLOCKED_IN_ALLREDUCE.replace(
    '  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2806 in all_reduce\n'
    '  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 81 in wrapper\n',
    '  File "/venv/lib/python3.11/site-packages/torch/cuda/__init__.py", line 1040 in synchronize\n')


def test_cuda_sync_counts_as_waiting_in_the_marked_collective():
    stalled = BLOCKED_IN_ALLREDUCE.replace(
        '  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2806 in all_reduce\n'
        '  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 81 in wrapper\n'
        '  File "/src/envmatrix/rank/main.py", line 108 in run_checks\n',
        '  File "/src/envmatrix/rank/main.py", line 94 in stall_here\n')
    ranks = [RankResult(rank=r, hostname=f"g{r}", killed_by="timeout", progress={"collective": "allgather", "seq": 2})
             for r in range(2)]
    line = diagnose(ranks, {0: BLOCKED_IN_CUDA_SYNC, 1: stalled}, {})["line"]
    assert line == ("rank 1 on host g1 stuck outside any collective at rank/main.py:94 in stall_here, before allgather "
                    "(seq 2); rank 0 wait in allgather (seq 2)")


# The box's hang (local launcher, NCCL 2.28.9, main 40dfbd1): rank 0 had enqueued allgather seq 2 and blocked in
# the next CUDA op of its own code (rank/main.py:115, torch.cat), rank 1 sat in stall_here before the same call.
ENQUEUED_THEN_BLOCKED = BLOCKED_IN_ALLREDUCE.replace(
    '  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2806 in all_reduce\n'
    '  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 81 in wrapper\n'
    '  File "/src/envmatrix/rank/main.py", line 108 in run_checks\n',
    '  File "/src/envmatrix/rank/main.py", line 115 in run_checks\n')
STALLED_BEFORE_THE_CALL = ENQUEUED_THEN_BLOCKED.replace("line 115 in run_checks\n",
                                                        "line 94 in stall_here\n  File \"/src/envmatrix/rank/main.py\", line 92 in enter\n")


def _box_ranks(launched_marks):
    return [RankResult(rank=r, hostname="vm", killed_by="timeout",
                       progress={"collective": "allgather", "seq": 2, **({"launched": True} if r in launched_marks else {})})
            for r in range(2)]


def test_a_rank_past_the_call_of_an_asynchronous_collective_waits_in_it():
    """The launched mark tells the rank that enqueued seq 2 (and waits on its result) from the one that never called it."""
    line = diagnose(_box_ranks({0}), {0: ENQUEUED_THEN_BLOCKED, 1: STALLED_BEFORE_THE_CALL}, {})["line"]
    assert line == ("rank 1 on host vm stuck outside any collective at rank/main.py:94 in stall_here, before allgather "
                    "(seq 2); rank 0 wait in allgather (seq 2)")


def test_the_box_hang_without_launched_marks_is_named_by_nccl_ras():
    """The very input that blamed rank 0 on the box (markers without the launched mark): NCCL RAS's operation
    counts say rank 1 launched nothing, and the line follows and shows them."""
    block = diagnose(_box_ranks(set()), {0: ENQUEUED_THEN_BLOCKED, 1: STALLED_BEFORE_THE_CALL}, {}, RAS_STATUS)
    assert block["line"] == ("rank 1 on host vm stuck outside any collective at rank/main.py:94 in stall_here, before "
                             "allgather (seq 2); rank 0 wait in allgather (seq 2); NCCL RAS: rank 1 launched no "
                             "operation, rank 0 launched up to operation 1")
    assert block["ras_operation_counts"] == {"0": 1, "1": 0}
    without_ras = diagnose(_box_ranks(set()), {0: ENQUEUED_THEN_BLOCKED, 1: STALLED_BEFORE_THE_CALL}, {})["line"]
    assert without_ras.startswith("rank 0 on host vm stuck outside any collective at rank/main.py:115")  # the box's line


def test_every_rank_past_the_call_names_the_one_furthest_behind_as_waiting_for_a_result():
    ranks = [RankResult(rank=r, hostname="h", killed_by="timeout", progress={"collective": "allreduce", "seq": s, "launched": True})
             for r, s in ((0, 4), (1, 3))]
    line = diagnose(ranks, {0: ENQUEUED_THEN_BLOCKED, 1: ENQUEUED_THEN_BLOCKED}, {})["line"]
    assert line == "rank 1 on host h stuck waiting for the result of allreduce (seq 3); rank 0 wait in allreduce (seq 4)"


def test_torch_waits_longer_than_the_driver_deadline_and_its_stack_request():
    from envmatrix.rank.main import torch_timeout_s

    for timeout_s, grace_s in ((8, 5.0), (120, 5.0), (1, 0.5)):
        waited = torch_timeout_s({"timeout_s": timeout_s, "grace_s": grace_s})
        # a rank that started waiting up to timeout_s before the deadline began still waits through the
        # deadline and the stack request after it (min(5, grace_s), engine.launch)
        assert waited >= 2 * timeout_s + min(5.0, grace_s), (timeout_s, waited)


def test_the_docs_hang_example_cites_the_line_a_stalled_rank_sits_on():
    # docs/hang-diagnosis.md shows the real root-cause line of a probe.stall run; the rank sleeps in stall_here,
    # whose line moves as rank/main.py changes (the doc said main.py:94 while the sleep was at line 120)
    import inspect
    import re

    from envmatrix.rank.main import stall_here

    doc = (Path(__file__).parent.parent / "docs" / "hang-diagnosis.md").read_text()
    (cited,) = re.findall(r"rank/main\.py:(\d+) in stall_here", doc)
    lines, first = inspect.getsourcelines(stall_here)
    (sleep,) = [first + i for i, text in enumerate(lines) if "time.sleep(" in text]
    assert int(cited) == sleep, f"docs/hang-diagnosis.md cites rank/main.py:{cited}; the stalled rank sleeps at line {sleep}"
