import sqlite3

import pytest

from envmatrix.errors import ConfigError
from envmatrix.results import ProbeResult, RankResult
from envmatrix.store import open_store


def _result(key, outcome="pass", metrics=()):
    return ProbeResult(
        run_key=key,
        setup={"name": key, "atoms": []},
        grid="1x2",
        probe={"name": "builtin", "params": {}},
        backend="gloo",
        launcher="local",
        outcome=outcome,
        ranks=[RankResult(rank=0, outcome=outcome, env={"NCCL_ALGO": "Ring"})],
        started_at=1.0,
        finished_at=2.5,
        metrics=list(metrics),
        sweep_id="s1",
    )


# put / resume / attempts / atomicity / readers / corrupt files: tests/contracts/test_store_contract.py


def test_metrics_rows_are_stored_with_their_result(tmp_path):
    row = {"collective": "allreduce", "size_bytes": 1024, "busbw_gbps": 1.5, "algbw_gbps": 1.0, "time_us": 3.0, "wrong": 0}
    with open_store(str(tmp_path / "m.sqlite")) as store:
        store.put(_result("a", metrics=[row]))
    with sqlite3.connect(tmp_path / "m.sqlite") as db:
        assert db.execute("SELECT collective, size_bytes, busbw_gbps FROM metrics").fetchall() == [("allreduce", 1024, 1.5)]


def test_unknown_scheme():
    with pytest.raises(ConfigError, match=r"unknown store URL scheme 'redis'; allowed: sqlite"):
        open_store("redis://x")
