"""Stores of other envmatrix versions (a QA pass's findings). The SQLite layout has not changed since the first
version (no schema version is kept; another layout is refused: test_store.py); what changes is the result JSON, as
fields are added."""

from __future__ import annotations

import json
import sqlite3

from envmatrix.results import ProbeResult, RankResult
from envmatrix.store import open_store


def _store_from_a_newer_version(path) -> None:
    with open_store(str(path)) as store:
        store.open_sweep("s1", {})
        store.put(ProbeResult(run_key="k", setup={"name": "a", "atoms": []}, grid="1x2", probe={"name": "builtin"},
                              backend="gloo", launcher="local", outcome="pass", sweep_id="s1",
                              ranks=[RankResult(rank=0, outcome="pass", env={"NCCL_ALGO": "Ring"})]))
    with sqlite3.connect(path) as db:  # fields a later version added, to the result and to a rank
        (blob,) = db.execute("SELECT result_json FROM results").fetchone()
        data = json.loads(blob)
        data["added_later"] = {"x": 1}
        data["ranks"][0]["rank_field_added_later"] = 2
        db.execute("UPDATE results SET result_json = ?", (json.dumps(data),))
    db.close()


def test_a_store_a_newer_version_wrote_is_read_with_the_fields_this_one_knows(tmp_path):
    # every command that read it (sweep's resume, report, diff, bisect --failing) died with "TypeError:
    # RankResult.__init__() got an unexpected keyword argument"
    path = tmp_path / "results.sqlite"
    _store_from_a_newer_version(path)
    with open_store(str(path)) as store:
        (result,) = store.latest()
    assert result.outcome == "pass" and result.ranks[0].env == {"NCCL_ALGO": "Ring"}


def test_report_of_a_run_directory_a_newer_version_wrote(cli, tmp_path):
    _store_from_a_newer_version(tmp_path / "o" / "results.sqlite")
    done = cli.run("report", str(tmp_path / "o"))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert (tmp_path / "o" / "report.html").exists()


def _vm_steps_of_one_reuse_check(path, results: int) -> int:
    with open_store(str(path)) as store:
        store.db.execute("BEGIN")
        for i in range(results):
            store.db.execute("INSERT INTO results (run_key, attempt, setup_name, grid, probe, backend, launcher, outcome,"
                             " started, finished, result_json) VALUES (?, 1, 'a', '1x1', 'p', 'gloo', 'local', 'pass', 0,"
                             " 0, ?)", (f"k{i}", json.dumps({"run_key": f"k{i}", "setup": {}, "grid": "1x1", "probe": {},
                                                             "backend": "gloo", "launcher": "local", "outcome": "pass"})))
        store.db.execute("COMMIT")
        steps = [0]
        store.db.set_progress_handler(lambda: steps.__setitem__(0, steps[0] + 1), 10)
        (result,) = store.latest(run_keys=["k7"])
        assert result.run_key == "k7"
        return steps[0]


def test_a_reuse_check_reads_the_asked_runs_not_the_whole_store(tmp_path):
    # run_trial's reuse check (every bisect probe, every search trial) read and grouped every stored result: 1.3 s per
    # trial in a 6000-result (148 MB) store; SQLite's own step count says whether the work grows with the store
    small = _vm_steps_of_one_reuse_check(tmp_path / "small.sqlite", 100)
    large = _vm_steps_of_one_reuse_check(tmp_path / "large.sqlite", 3000)
    assert large < 2 * small + 10, (small, large)  # an index lookup: a level deeper at most
