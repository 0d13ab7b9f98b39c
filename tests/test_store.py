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


def test_put_resume_and_attempts(tmp_path):
    path = tmp_path / "r.sqlite"
    with open_store(f"sqlite:///{path}") as store:
        store.open_sweep("s1", {"x": 1})
        store.open_sweep("s1", {"x": 1})
        assert store.put(_result("a")) == 1
        assert store.put(_result("b", "init_error")) == 1
        assert store.completed_keys(["a", "b", "c"]) == {"a", "b"}
        assert store.put(_result("a", "timeout")) == 2
        latest = {r.run_key: r for r in store.latest(sweep_id="s1")}
        assert latest["a"].outcome == "timeout" and latest["b"].outcome == "init_error"
        assert latest["a"].ranks[0].env == {"NCCL_ALGO": "Ring"} and latest["a"].duration_s == 1.5
        assert store.count() == 3 and store.count("a") == 2
        assert [s["id"] for s in store.sweeps()] == ["s1"]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_metrics_rows_are_stored_with_their_result(tmp_path):
    row = {"collective": "allreduce", "size_bytes": 1024, "busbw_gbps": 1.5, "algbw_gbps": 1.0, "time_us": 3.0, "wrong": 0}
    with open_store(str(tmp_path / "m.sqlite")) as store:
        store.put(_result("a", metrics=[row]))
    with sqlite3.connect(tmp_path / "m.sqlite") as db:
        assert db.execute("SELECT collective, size_bytes, busbw_gbps FROM metrics").fetchall() == [("allreduce", 1024, 1.5)]


def test_unknown_scheme():
    with pytest.raises(ConfigError, match=r"unknown store URL scheme 'redis'; allowed: sqlite"):
        open_store("redis://x")
