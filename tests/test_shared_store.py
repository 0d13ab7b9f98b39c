"""One store, two real sweep processes: the second is refused with a line naming the first (lock), every
(setup, grid) is stored exactly once, and the refused command resumes cleanly afterwards."""

from __future__ import annotations

import re
import sqlite3
import sys
import time

import pytest

from conftest import assert_no_processes, write_conf


def _conf(tmp_path):
    setups = "\n".join(f"  s{i}: {{ENVMATRIX_T: '{i}'}}" for i in range(4))
    return write_conf(tmp_path / "slow.yaml", f"""
backend: gloo
grids: [1x1, 1x2]
setups:
{setups}
probe:
  name: command
  timeout_s: 60
  command: [{sys.executable}, -c, "import time; time.sleep(0.5)"]
""")


def _per_key(db_path):
    with sqlite3.connect(db_path) as db:
        return dict(db.execute("SELECT run_key, COUNT(*) FROM results GROUP BY run_key").fetchall())


@pytest.mark.slow
def test_two_concurrent_sweeps_on_one_out_store_each_run_once(cli, tmp_path):
    conf, out = _conf(tmp_path), tmp_path / "o"
    args = ("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars")
    first = cli.popen(*args)
    second = cli.popen(*args)  # started together: whichever locks first runs, the other is refused
    outs = {}
    for name, proc in (("first", first), ("second", second)):
        outs[name] = (proc.communicate(timeout=300)[0], proc.returncode)
    codes = sorted(code for _, code in outs.values())
    assert codes == [0, 2], outs
    (winner,) = [p for p in (first, second) if p.returncode == 0]
    (refused_out,) = [o for o, code in outs.values() if code == 2]
    lines = [line for line in refused_out.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in refused_out, refused_out
    assert re.search(rf"in use by envmatrix pid {winner.pid} on \S+ since", lines[0]), lines[0]
    assert "use another --out" in lines[0]
    counts = _per_key(out / "results.sqlite")
    assert len(counts) == 8 and set(counts.values()) == {1}
    # The refused command, rerun later, resumes: nothing is run or stored twice.
    again = cli.run(*args)
    assert again.returncode == 0 and "8 already in the store" in again.stdout, again.stdout + again.stderr
    assert _per_key(out / "results.sqlite") == counts
    assert_no_processes(cli.marker)


@pytest.mark.slow
def test_second_sweep_started_mid_run_is_refused_without_touching_the_store(cli, tmp_path):
    conf, out = _conf(tmp_path), tmp_path / "o"
    args = ("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars")
    first = cli.popen(*args)
    db_path = out / "results.sqlite"
    deadline = time.time() + 120
    while time.time() < deadline and not (db_path.exists() and _count(db_path) >= 1):
        time.sleep(0.1)
    refused = cli.run(*args, "--rerun")
    assert refused.returncode == 2 and f"pid {first.pid}" in refused.stderr, refused.stderr
    assert first.poll() is None, "the first sweep should still be running (probes sleep 0.5 s each)"
    first.communicate(timeout=300)
    assert first.returncode == 0
    assert set(_per_key(db_path).values()) == {1}  # the refused --rerun added no attempt
    assert_no_processes(cli.marker)


def _count(db_path):
    try:
        with sqlite3.connect(db_path) as db:
            return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow
def test_a_bench_into_a_store_a_sweep_holds_is_refused(cli, tmp_path):
    # docs/reports.md: a second sweep/bench on the same --out is refused before it launches anything (bench ran and
    # wrote into the held store)
    conf, out = _conf(tmp_path), tmp_path / "o"
    first = cli.popen("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars")
    db_path = out / "results.sqlite"
    deadline = time.time() + 120
    while time.time() < deadline and not (db_path.exists() and _count(db_path) >= 1):
        time.sleep(0.1)
    refused = cli.run("bench", "backend=gloo", "--grid", "1x2", "-b", "8", "-e", "8", "-c", "allreduce", "--out", str(out))
    assert refused.returncode == 2 and f"pid {first.pid}" in refused.stderr, refused.stdout + refused.stderr
    assert first.poll() is None, "the sweep should still be running (probes sleep 0.5 s each)"
    first.communicate(timeout=300)
    assert first.returncode == 0 and not list(out.glob("bench_*.md"))
    assert_no_processes(cli.marker)
