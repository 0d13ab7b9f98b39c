"""Root causes from real rank output recorded on the 4xH200 box (NCCL 2.28.9, torch 2.11)."""

import json
from pathlib import Path

import pytest

from envmatrix.execution.processes import ProcessOutcome
from envmatrix.probes.builtin import BuiltinProbe
from envmatrix.probes.outcome import verdict
from envmatrix.results import RankResult

DATA = Path(__file__).parent / "data" / "h200"


def _rank(case: str, rank: int, ended_at: float) -> RankResult:
    report = json.loads((DATA / f"{case}_rank{rank}.json").read_text())
    log = (DATA / f"{case}_rank{rank}.log").read_text()
    process = ProcessOutcome(f"rank{rank}", 100 + rank, 1, None, None, ended_at)
    return BuiltinProbe().interpret(RankResult(rank=rank), process, report, log)


@pytest.mark.parametrize(
    "case,outcome,line",
    [
        ("bad_plugin", "init_error", "Failed to initialize any NET plugin"),
        ("collnet_direct", "init_error", "Error : no algorithm/protocol available for function AllReduce with datatype ncclFloat32. NCCL_ALGO was set to CollNetDirect."),
        ("tree_simple", "collective_error", "Error : no algorithm/protocol available for function AllGather with datatype ncclInt8. NCCL_ALGO was set to Tree. NCCL_PROTO was set to Simple."),
        ("socket_bad_if", "init_error", "Bootstrap : no socket interface found"),
    ],
)
def test_root_cause_from_recorded_nccl_failures(case, outcome, line):
    # Process exit order is deliberately reversed: rank 1 is seen ending first.
    ranks = [_rank(case, 0, ended_at=2e9), _rank(case, 1, ended_at=1e9)]
    got, cause = verdict(ranks)
    assert got == outcome
    assert cause["line"] == line


def test_peer_store_error_is_not_the_root_cause():
    ranks = [_rank("socket_bad_if", 0, 2e9), _rank("socket_bad_if", 1, 1e9)]
    assert "retrieving ncclUniqueId" in ranks[1].error
    _, cause = verdict(ranks)
    assert cause["rank"] == 0
