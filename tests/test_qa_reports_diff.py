"""envmatrix diff between real sweeps (a QA pass): regressions, fixes, new, removed and renamed setups, other grids,
an empty store, its exit codes, and hostile names and root-cause lines in its text and JSON."""

from __future__ import annotations

import json
import sqlite3
import sys

import pytest
import yaml

from conftest import write_conf

PROBE = ("import os, sys\n"
         "v = os.environ.get('QA_FAIL')\n"
         "if v: sys.stderr.write('\\x1b[31mERROR\\x1b[0m ' + v + '\\n')\n"
         "sys.exit(1 if v else 0)\n")


def sweep(cli, tmp_path, name: str, setups: dict, grids=("1x1",)) -> str:
    conf = write_conf(tmp_path / f"{name}.yaml", yaml.safe_dump({
        "name": name, "backend": "gloo", "grids": list(grids), "setups": setups,
        "probe": {"name": "command", "timeout_s": 60, "command": [sys.executable, "-c", PROBE]}}))
    out = str(tmp_path / name)
    done = cli.run("sweep", f"conf={conf}", "--out", out, "--allow-unknown-vars")
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_diff_of_real_sweeps_flips_renames_grids_and_hostile_text(cli, tmp_path):
    a = sweep(cli, tmp_path, "a", {"keep": {"QA_V": "1"}, "breaks|<b>": {"QA_V": "2"}, "was_bad": {"QA_FAIL": "old"},
                                   "old_name": {"QA_V": "3"}})
    b = sweep(cli, tmp_path, "b", {"keep": {"QA_V": "1"}, "breaks|<b>": {"QA_FAIL": "\x1b]0;title\x07 new"},
                                   "was_bad": {}, "new_name": {"QA_V": "3"}})
    done = cli.run("diff", a, b)
    assert done.returncode == 1, done.stdout + done.stderr  # a regression is the answer, whatever else is missing
    # Before: the root-cause line's terminal escapes went to the terminal as they were
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert ("REGRESSION (breaks|<b>) 1x1 [gloo]: pass -> exit_error: \\x1b[31mERROR\\x1b[0m \\x1b]0;title\\x07 new"
            in done.stdout), done.stdout
    assert "fixed (was_bad) 1x1 [gloo]: exit_error -> pass" in done.stdout
    assert "only in A: (old_name) 1x1 [gloo]" in done.stdout and "only in B: (new_name) 1x1 [gloo]" in done.stdout
    as_json = cli.run("diff", a, b, "--json")
    data = json.loads(as_json.stdout)  # JSON keeps the line as recorded, escaped by JSON itself
    assert as_json.returncode == 1 and data["regressed"] and not data["inconclusive"]
    (broke,) = data["pass_to_fail"]
    assert broke["setup"] == "breaks|<b>" and broke["line"].endswith("\x1b]0;title\x07 new")
    assert [f["setup"] for f in data["fail_to_pass"]] == ["was_bad"]
    assert data["only_in_a"] == [["old_name", "1x1", "gloo"]] and data["only_in_b"] == [["new_name", "1x1", "gloo"]]
    # the same setups renamed only: nothing of run A compared for it, so inconclusive (exit 3), never a pass
    renamed = cli.run("diff", a, sweep(cli, tmp_path, "c", {"keep": {"QA_V": "1"}, "breaks|<b>": {"QA_V": "2"},
                                                             "was_bad": {"QA_FAIL": "old"}, "new_name": {"QA_V": "3"}}))
    assert renamed.returncode == 3 and "INCONCLUSIVE: no regression in the 3 cells compared, but 1 of run A's" in renamed.stdout
    other_grid = sweep(cli, tmp_path, "d", {"keep": {"QA_V": "1"}}, grids=("1x2",))
    assert cli.run("diff", a, other_grid).returncode == 3
    assert cli.run("diff", other_grid, a).returncode == 3
    assert cli.run("diff", a, a).returncode == 0
    # an empty store (its schema, no rows) and a missing directory: bad input, one line, exit 2
    empty = tmp_path / "empty"
    empty.mkdir()
    with sqlite3.connect(tmp_path / "a" / "results.sqlite") as src, sqlite3.connect(empty / "results.sqlite") as dst:
        for (sql,) in src.execute("SELECT sql FROM sqlite_master WHERE type='table' AND sql IS NOT NULL "
                                  "AND name NOT LIKE 'sqlite_%'"):
            dst.execute(sql)
    for target in (empty, tmp_path / "missing"):
        bad = cli.run("diff", a, str(target))
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr, bad.stderr
