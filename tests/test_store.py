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


def test_a_corrupt_store_is_named_by_its_path_as_given(tmp_path, monkeypatch):
    from envmatrix.paths import store_url

    (tmp_path / "results.sqlite").write_bytes(b"not a database" * 20)
    with pytest.raises(ConfigError) as err:  # was "//tmp/.../results.sqlite": the URL split at "://"
        open_store(store_url(str(tmp_path)))
    assert str(err.value).startswith(f"{tmp_path}/results.sqlite: corrupt store (not an SQLite database)")
    monkeypatch.chdir(tmp_path)  # sqlite:///rel is relative to the cwd, as in SQLAlchemy (it was /rel)
    with pytest.raises(ConfigError, match=r"^results.sqlite: corrupt store"):
        open_store("sqlite:///results.sqlite")


@pytest.mark.parametrize("ddl, why", [
    ("CREATE TABLE results (foo)", "no table sweeps"),
    ("CREATE TABLE sweeps (id TEXT); CREATE TABLE results (run_key TEXT); CREATE TABLE metrics (x)",
     "table sweeps lacks config_json, created"),
])
def test_a_database_with_the_stores_table_names_in_another_layout_is_refused_untouched(tmp_path, ddl, why):
    # it passed as a store: CREATE TABLE IF NOT EXISTS added the missing tables to the user's file, then an index on a
    # missing column failed ("no such column: sweep_id") after the file had changed
    path = tmp_path / "results.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(ddl)
    db.close()
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=rf"corrupt store \(not envmatrix's layout: {why}\); left untouched"):
        open_store(str(path))
    assert path.read_bytes() == before


def _open_and_close(path: str, barrier, outcomes) -> None:
    from envmatrix.store.sqlite import SqliteStore

    barrier.wait()
    try:
        SqliteStore(path).db.close()
        outcomes.put("ok")
    except Exception as exc:  # noqa: BLE001 - the outcome is the assertion's subject
        outcomes.put(f"{type(exc).__name__}: {exc}")


def test_workers_opening_one_new_store_together_all_open_it(tmp_path):
    """A search fleet's workers start together and open the run directory's new results.sqlite at once: switching it to
    WAL returned 'database is locked' to some of them (6 openers: 26 of 180 before the retry), and that worker died."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    failures = []
    for round_ in range(15):
        path, n = str(tmp_path / f"r{round_}.sqlite"), 6
        barrier, outcomes = ctx.Barrier(n), ctx.Queue()
        procs = [ctx.Process(target=_open_and_close, args=(path, barrier, outcomes)) for _ in range(n)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        failures += [o for o in (outcomes.get(timeout=10) for _ in range(n)) if o != "ok"]
    assert failures == []
