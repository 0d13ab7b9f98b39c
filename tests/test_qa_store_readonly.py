"""A run directory on read-only media (an archived run, a read-only share): sweep refuses to write there, report and
diff read it (a QA pass's findings). A read-only tmpfs needs root; elsewhere these are skipped."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import assert_no_processes, write_conf
from envmatrix.errors import ConfigError
from envmatrix.results import ProbeResult
from envmatrix.store import open_store


@pytest.fixture
def media(tmp_path):
    """A tmpfs mounted at tmp_path/media; yields a function that makes it read-only."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "media"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(where)], capture_output=True).returncode:
        pytest.skip("this host does not allow mounting a tmpfs")
    try:
        yield where, lambda: subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _conf(tmp_path: Path) -> Path:
    return write_conf(tmp_path / "c.yaml", f"""
name: ro
backend: gloo
grids: [1x1]
setups: {{ok: {{QA_V: ok}}, bad: {{QA_V: bad}}}}
probe:
  name: command
  timeout_s: 30
  command: [{sys.executable}, -c, "import os, sys; sys.exit(os.environ['QA_V'] == 'bad')"]
""")


@pytest.mark.slow
def test_an_archived_run_directory_is_reported_and_diffed_where_it_lies(cli, tmp_path, media):
    # report and diff of a run directory on read-only media said 'corrupt store (unable to open database file); move it
    # away', exit 2: SQLite could not make the -shm a WAL store wants beside it
    where, make_read_only = media
    conf, out = _conf(tmp_path), where / "run"
    assert cli.run("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars").returncode == 1
    make_read_only()
    report = cli.run("report", str(out), "-o", str(tmp_path / "r.html"))
    assert report.returncode == 0, report.stdout + report.stderr
    assert "ok" in (tmp_path / "r.html").read_text() and "bad" in (tmp_path / "r.html").read_text()
    diff = cli.run("diff", str(out), str(out))
    assert diff.returncode == 0 and "no regression" in diff.stdout, diff.stdout + diff.stderr
    # a sweep into it: one line, exit 2
    again = cli.run("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars", "--rerun")
    assert again.returncode == 2 and "not writable" in again.stderr and "Traceback" not in again.stderr, again.stderr
    assert_no_processes(cli.marker)


def _result(key: str) -> ProbeResult:
    return ProbeResult(run_key=key, setup={"name": key}, grid="1x1", probe={"name": "command"}, backend="gloo",
                       launcher="local", outcome="pass")


def test_a_read_only_store_is_read_and_refuses_writes_in_one_line(media):
    where, make_read_only = media
    path = where / "results.sqlite"
    with open_store(str(path)) as store:
        store.put(_result("a"))
    make_read_only()
    with open_store(str(path)) as store:
        assert [r.run_key for r in store.latest()] == ["a"] and store.completed_keys(["a", "b"]) == {"a"}
        with pytest.raises(ConfigError, match=r"results.sqlite: the store is read-only here; allowed: a writable"):
            store.put(_result("b"))


def test_a_killed_stores_wal_without_its_shm_on_read_only_media_is_one_line(media, tmp_path):
    where, make_read_only = media
    writer = ("import os, sys; from envmatrix.store import open_store; from envmatrix.results import ProbeResult\n"
              "s = open_store(sys.argv[1]); s.db.execute('PRAGMA wal_autocheckpoint=0')\n"
              "s.put(ProbeResult(run_key='a', setup={}, grid='1x1', probe={}, backend='gloo', launcher='local', "
              "outcome='pass'))\nos.kill(os.getpid(), 9)\n")
    subprocess.run([sys.executable, "-c", writer, str(where / "results.sqlite")], check=False)
    assert (where / "results.sqlite-wal").exists()
    (where / "results.sqlite-shm").unlink()
    make_read_only()
    with pytest.raises(ConfigError, match=r"cannot read the store in a read-only place \(.+\); allowed: copy the run"):
        open_store(str(where / "results.sqlite"))
