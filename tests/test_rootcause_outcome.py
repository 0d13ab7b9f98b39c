from envmatrix.probes.outcome import verdict
from envmatrix.probes.rootcause import root_cause_line
from envmatrix.results import RankResult

# Shapes of torch/NCCL failure text (torch.distributed.DistBackendError message layout).
NCCL_INVALID_USAGE = """Traceback (most recent call last):
  File "rank_main.py", line 120, in main
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
