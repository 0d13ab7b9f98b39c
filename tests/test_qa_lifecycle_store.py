"""The sweep -> bisect lifecycle sharing one run directory's store, with real processes (a QA pass's findings)."""

from __future__ import annotations

import sqlite3
import sys
import time

import pytest

from conftest import assert_no_processes, write_conf


def _count(db_path) -> int:
    try:
        with sqlite3.connect(db_path) as db:
            return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow
def test_bisect_failing_into_a_store_a_sweep_still_runs_is_refused(cli, tmp_path):
    # --failing reads "the last sweep" of the store: while that sweep still ran, its first (passing) cell was all
    # there was, and bisect said "nothing to bisect", exit 0, though the setup after it fails.
    conf = write_conf(tmp_path / "c.yaml", f"""
name: lifecycle
backend: gloo
grids: [1x1]
setups:
  ok: {{ENVMATRIX_QA: ok}}
  bad: {{ENVMATRIX_QA: bad}}
probe:
  name: command
  timeout_s: 60
  command: [{sys.executable}, -c, "import os, sys, time; time.sleep(1.5); sys.exit(os.environ.get('ENVMATRIX_QA') == 'bad')"]
""")
    out = tmp_path / "o"
    sweep = cli.popen("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars", "--jobs", "1")
    deadline = time.time() + 120
    while time.time() < deadline and _count(out / "results.sqlite") < 1:
        time.sleep(0.05)
    bisect = cli.run("bisect", f"conf={conf}", "--out", str(out), "--failing", "1x1", "--allow-unknown-vars")
    assert sweep.poll() is None, "the sweep should still be running its second setup"
    assert bisect.returncode == 2 and f"in use by envmatrix pid {sweep.pid}" in bisect.stderr, bisect.stdout + bisect.stderr
    sweep.communicate(timeout=120)
    assert sweep.returncode == 1
    # once the sweep is done the same bisect names the culprit
    done = cli.run("bisect", f"conf={conf}", "--out", str(out), "--failing", "1x1", "--allow-unknown-vars")
    assert done.returncode == 1 and "ENVMATRIX_QA=bad" in done.stdout, done.stdout + done.stderr
    assert_no_processes(cli.marker)
