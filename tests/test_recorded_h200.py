"""Root causes from real rank output recorded on the 4xH200 box (NCCL 2.28.9, torch 2.11)."""

import json
from pathlib import Path

import pytest

from envmatrix.boundary import ProcessOutcome
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


REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("grid, allowed", [("1x4", 48), ("2x2", 36)])
def test_recorded_exhaustive_search_stores_still_load(grid, allowed, monkeypatch):
    """The committed box stores (benchmarks/results/h200_search) are read by today's store and search code:
    every allowed config has a passed result, each recorded with the NCCL really loaded and NVLS off on every rank."""
    import gzip
    import sqlite3
    import sys

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import search_efficiency

    store = REPO / "benchmarks" / "results" / "h200_search" / f"exhaustive_{grid}.sqlite.gz"
    space, objectives, grids = search_efficiency.load_search(REPO / "conf" / f"search_h200_{grid}.yaml")
    table = search_efficiency.table_from_store(store, space, objectives)
    assert grids == [grid] and len(space.allowed_rows()) == allowed and len(table) == allowed
    assert all(v[0] > 0 for v in table.values())
    with gzip.open(store, "rb") as fh:
        raw = fh.read()
    conn = sqlite3.connect(":memory:")
    conn.deserialize(raw)
    for (text,) in conn.execute("SELECT result_json FROM results"):
        result = json.loads(text)
        assert result["versions"]["nccl_loaded"] == "2.28.9", result["run_key"]
        assert all(r["env"]["NCCL_NVLS_ENABLE"] == "0" for r in result["ranks"]), result["run_key"]
    del sys.modules["search_efficiency"]
