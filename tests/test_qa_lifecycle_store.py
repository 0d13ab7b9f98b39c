"""The sweep -> bisect lifecycle sharing one run directory's store, with real processes (a QA pass's findings)."""

from __future__ import annotations

import json
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


# a probe: 'bad' fails once $QA_RELEASE exists, anything else passes at once
WAIT_FOR_RELEASE = ("import os, sys, time; bad = os.environ.get('ENVMATRIX_QA') == 'bad'; "
                    "[time.sleep(0.05) for _ in range(2400) if bad and not os.path.exists(os.environ['QA_RELEASE'])]; "
                    "sys.exit(bad)")


def _held_conf(cli, tmp_path):
    """Setups ok and bad on 1x1; bad's probe runs until the test creates tmp_path/release."""
    cli.env["QA_RELEASE"] = str(tmp_path / "release")
    return write_conf(tmp_path / "c.yaml", f"""
name: lifecycle
backend: gloo
grids: [1x1]
setups:
  ok: {{ENVMATRIX_QA: ok}}
  bad: {{ENVMATRIX_QA: bad}}
probe:
  name: command
  timeout_s: 60
  command: [{sys.executable}, -c, "{WAIT_FOR_RELEASE}"]
""")


def _sweep_held_at_its_second_setup(cli, tmp_path):
    """A sweep of _held_conf started in the background, returned once its first cell is stored."""
    conf = _held_conf(cli, tmp_path)
    out = tmp_path / "o"
    sweep = cli.popen("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars", "--jobs", "1")
    deadline = time.time() + 120
    while time.time() < deadline and _count(out / "results.sqlite") < 1:
        time.sleep(0.05)
    return conf, out, sweep


@pytest.mark.slow
def test_bisect_failing_into_a_store_a_sweep_still_runs_is_refused(cli, tmp_path):
    # --failing reads "the last sweep" of the store: while that sweep still ran, its first (passing) cell was all
    # there was, and bisect said "nothing to bisect", exit 0, though the setup after it fails.
    conf, out, sweep = _sweep_held_at_its_second_setup(cli, tmp_path)
    bisect = cli.run("bisect", f"conf={conf}", "--out", str(out), "--failing", "1x1", "--allow-unknown-vars")
    assert sweep.poll() is None, "the sweep should still be running its second setup"
    (tmp_path / "release").touch()
    assert bisect.returncode == 2 and f"in use by envmatrix pid {sweep.pid}" in bisect.stderr, bisect.stdout + bisect.stderr
    sweep.communicate(timeout=120)
    assert sweep.returncode == 1
    # once the sweep is done the same bisect names the culprit
    done = cli.run("bisect", f"conf={conf}", "--out", str(out), "--failing", "1x1", "--allow-unknown-vars")
    assert done.returncode == 1 and "ENVMATRIX_QA=bad" in done.stdout, done.stdout + done.stderr
    assert_no_processes(cli.marker)


def _two_setups_conf(path, extra: str = "") -> str:
    write_conf(path, f"""
name: lifecycle
backend: gloo
grids: [1x1, 1x2]
setups:
  ok: {{ENVMATRIX_QA: ok}}
  bad: {{ENVMATRIX_QA: bad}}
{extra}
probe:
  name: command
  timeout_s: 60
  command: [{sys.executable}, -c, "import os, sys; sys.exit(os.environ.get('ENVMATRIX_QA') == 'bad')"]
""")
    return f"conf={path}"


@pytest.mark.slow
def test_bisect_failing_reads_the_cells_the_last_sweep_found_in_the_store(cli, tmp_path):
    # A sweep that finds a run in the store reuses it, and the stored row keeps the sweep_id it was stored under:
    # --failing read only the rows stored under the last sweep's id. A second sweep of the config with one setup
    # more ran only that setup, so bisect said "nothing to bisect", exit 0, with 'bad' failing in it; a sweep of a
    # grid subset, all reused, was "never ran 1x1", exit 2. And a resumed sweep was not the last one.
    out = str(tmp_path / "o")
    conf = _two_setups_conf(tmp_path / "c.yaml")
    assert cli.run("sweep", conf, "--out", out, "--allow-unknown-vars").returncode == 1
    more = _two_setups_conf(tmp_path / "more.yaml", "  extra: {ENVMATRIX_QA: extra}")
    again = cli.run("sweep", more, "--out", out, "--allow-unknown-vars")
    assert again.returncode == 1 and "4 already in the store" in again.stdout, again.stdout + again.stderr
    done = cli.run("bisect", more, "--out", out, "--failing", "1x1", "--allow-unknown-vars")
    assert done.returncode == 1 and "{ENVMATRIX_QA=bad}" in done.stdout, done.stdout + done.stderr
    # a grid subset of the first config (a new sweep, every run reused), then the first config resumed
    assert cli.run("sweep", conf, "grids=[1x2]", "--out", out, "--allow-unknown-vars").returncode == 1
    assert cli.run("sweep", conf, "--out", out, "--allow-unknown-vars").returncode == 1
    done = cli.run("bisect", conf, "--out", out, "--failing", "1x1", "--setup", "bad", "--allow-unknown-vars")
    assert done.returncode == 1 and "{ENVMATRIX_QA=bad}" in done.stdout, done.stdout + done.stderr
    assert_no_processes(cli.marker)


@pytest.mark.slow
def test_bisect_failing_names_a_reused_cell_by_the_sweeps_setup(cli, tmp_path):
    # The sweep reused a run an earlier bisect stored for the same env: --failing named it after the bisect's probe
    # ('bisect-1'), so --setup mine found no failing run.
    conf = _two_setups_conf(tmp_path / "c.yaml")
    (tmp_path / "bad.env").write_text("export ENVMATRIX_QA=bad\n")
    out = str(tmp_path / "o")
    assert cli.run("bisect", conf, "--env-file", str(tmp_path / "bad.env"), "--grid", "1x1", "--out", out,
                   "--allow-unknown-vars").returncode == 1
    assert cli.run("sweep", conf, "grids=[1x1]", "--out", out, "--allow-unknown-vars").returncode == 1
    done = cli.run("bisect", conf, "--out", out, "--failing", "1x1", "--setup", "bad", "--allow-unknown-vars")
    assert done.returncode == 1 and "bisect: bad on 1x1" in done.stdout, done.stdout + done.stderr
    assert (tmp_path / "o" / "bisect_bad_1x1.md").exists()


@pytest.mark.slow
def test_bisect_failing_under_another_probe_uses_no_stored_cell_as_a_probe(cli, tmp_path):
    # The sweep's cells were free probes whatever this bisect measured: under a --probe-cmd that passes, the sweep's
    # failing cell stood for the env's failure while every launched probe passed, and bisect named all atoms of
    # 'bad' one proven interacting culprit, exit 1.
    conf = _two_setups_conf(tmp_path / "c.yaml", "  bad2: {ENVMATRIX_QA: bad, ENVMATRIX_QB: x}")
    out = str(tmp_path / "o")
    assert cli.run("sweep", conf, "grids=[1x1]", "--out", out, "--allow-unknown-vars").returncode == 1
    done = cli.run("bisect", conf, "--out", out, "--failing", "1x1", "--setup", "bad2", "--allow-unknown-vars",
                   "--probe-cmd", f"{sys.executable} -c pass", "--json", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    (report,) = json.loads((tmp_path / "r.json").read_text())
    assert report["culprits"] == [] and report["free_probes"] == 0 and report["probes_launched"] == 1
    assert "Original failure: none (the env passes)" in done.stdout, done.stdout  # it read 'pass: None'
    # the sweep's own probe: its cells are free probes
    done = cli.run("bisect", conf, "--out", out, "--failing", "1x1", "--setup", "bad2", "--allow-unknown-vars",
                   "--json", str(tmp_path / "r.json"))
    (report,) = json.loads((tmp_path / "r.json").read_text())
    assert done.returncode == 1 and report["culprits"] == [["ENVMATRIX_QA=bad"]] and report["free_probes"] >= 2


@pytest.mark.slow
def test_bisect_failing_names_setups_as_the_resumed_sweep_does(cli, tmp_path):
    # A setup renamed (same env: the same runs, so the same sweep id) and the sweep resumed: the sweep's record
    # kept the first run's config, so --failing knew the setup by its old name only.
    out = str(tmp_path / "o")
    assert cli.run("sweep", _two_setups_conf(tmp_path / "c.yaml"), "grids=[1x1]", "--out", out,
                   "--allow-unknown-vars").returncode == 1
    renamed = tmp_path / "c.yaml"
    renamed.write_text((tmp_path / "c.yaml").read_text().replace("  bad:", "  worse:"))
    again = cli.run("sweep", f"conf={renamed}", "grids=[1x1]", "--out", out, "--allow-unknown-vars")
    assert again.returncode == 1 and "2 already in the store" in again.stdout, again.stdout + again.stderr
    done = cli.run("bisect", f"conf={renamed}", "--out", out, "--failing", "1x1", "--setup", "worse", "--allow-unknown-vars")
    assert done.returncode == 1 and "bisect: worse on 1x1" in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_host_bisect_into_a_store_a_sweep_still_runs_is_refused(cli, tmp_path):
    # bisect --hosts ran its rounds and stored them beside the cells of a sweep still running into the store, where
    # sweep, bench and env bisect are refused.
    conf, out, sweep = _sweep_held_at_its_second_setup(cli, tmp_path)
    (tmp_path / "hosts.txt").write_text("localhost\n127.0.0.1\n")  # loopback only: never reached with the lock
    hosts = cli.run("bisect", "--hosts", str(tmp_path / "hosts.txt"), "launcher=mpirun", "backend=gloo", "--grid", "1x1",
                    "--out", str(out), "probe.timeout_s=10")
    assert sweep.poll() is None, "the sweep should still be running its second setup"
    (tmp_path / "release").touch()
    assert hosts.returncode == 2 and f"in use by envmatrix pid {sweep.pid}" in hosts.stderr, hosts.stdout + hosts.stderr
    sweep.communicate(timeout=120)
    with sqlite3.connect(out / "results.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM results WHERE sweep_id LIKE 'hosts-%'").fetchone()[0] == 0
    assert_no_processes(cli.marker)



@pytest.mark.slow
def test_bisect_failing_with_a_setup_the_sweep_never_ran_is_bad_input_even_when_nothing_failed(cli, tmp_path):
    # A misspelled --setup exited 0 ("nothing to bisect") when no run had failed on the grid, and 2 when one had:
    # the typo is bad input either way; a setup that ran and passed is still "nothing to bisect", exit 0.
    out = str(tmp_path / "o")
    conf = _two_setups_conf(tmp_path / "c.yaml")
    assert cli.run("sweep", conf, "grids=[1x1]", "~setups.bad", "--out", out, "--allow-unknown-vars").returncode == 0
    for given, code in [("okk", 2), ("bad", 2), ("ok", 0)]:  # bad: in the config, never swept
        done = cli.run("bisect", conf, "~setups.bad", "--out", out, "--failing", "1x1", "--setup", given,
                       "--allow-unknown-vars")
        assert done.returncode == code, (given, done.stdout + done.stderr)
        if code == 2:
            assert len(done.stderr.strip().splitlines()) == 1 and f"--setup '{given}'" in done.stderr, done.stderr
            assert "allowed: ok" in done.stderr and ("did you mean ok?" in done.stderr) == (given == "okk"), done.stderr
        else:
            assert "nothing to bisect" in done.stdout, done.stdout + done.stderr
