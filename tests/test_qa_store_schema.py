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
