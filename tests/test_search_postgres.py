"""Two concurrent search workers share one study on a real PostgreSQL server (started here, on a unix socket)."""

import os
import sqlite3
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from optuna.trial import TrialState

from search_helpers import fake_conf, search_argv

pytestmark = pytest.mark.slow
PG_BIN = Path("/usr/lib/postgresql")


def _bin(name):
    found = shutil.which(name) or next((str(p) for p in sorted(PG_BIN.glob(f"*/bin/{name}"), reverse=True)), None)
    if not found:
        pytest.skip(f"{name} not installed (.ci/run installs Debian's postgresql)")
    return found


def _as_postgres(argv):
    """postgres binaries refuse root: run them as the postgres user when we are root."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


@pytest.fixture
def postgres_url():
    pytest.importorskip("psycopg2")
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    root = Path(tempfile.mkdtemp(prefix="envmatrix-pg-", dir="/tmp"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    run = lambda argv: subprocess.run(_as_postgres(argv), check=True, capture_output=True, text=True, timeout=120)  # noqa: E731
    run([initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
    opts = f"-k {sock} -c listen_addresses='' -c fsync=off -c max_connections=50"
    run([pg_ctl, "-D", str(data), "-o", opts, "-l", str(root / "server.log"), "-w", "start"])
    try:
        run([str(Path(os.path.realpath(initdb)).parent / "createdb"), "-h", str(sock), "-U", "postgres", "envmatrix"])
        yield f"postgresql+psycopg2://postgres@/envmatrix?host={sock}"
    finally:
        subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"]), capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


def test_two_workers_share_one_study(cli, tmp_path, postgres_url):
    import optuna

    conf = fake_conf(tmp_path / "f.yaml")
    outs = [tmp_path / "w1", tmp_path / "w2"]
    procs = [
        subprocess.Popen(search_argv("search", f"conf={conf}", f"search.storage='{postgres_url}'", "search.study_name=shared",
                                     "search.sampler=random", f"search.seed={i}", "search.confirm_top_k=0", "--trials", "10", "--out", str(out)),
                         cwd=cli.cwd, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for i, out in enumerate(outs)
    ]
    logs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], logs
    study = optuna.load_study(study_name="shared", storage=postgres_url)
    trials = study.get_trials()
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    counted = [t for t in trials if not t.user_attrs.get("forbidden")]
    assert 10 <= len(counted) <= 11  # each worker checks the budget before it asks: at most one over
    assert {t.user_attrs["worker_pid"] for t in trials} == {p.pid for p in procs}
    probed = [t for t in trials if t.user_attrs.get("results") and t.user_attrs.get("cached_from") is None]
    told = sorted(r["run_key"] for t in probed for r in t.user_attrs["results"])
    stored = []
    for out in outs:
        with sqlite3.connect(out / "results.sqlite") as db:
            stored += [k for k, s in db.execute("SELECT run_key, setup_name FROM results") if s != "default"]
    # every probed trial's result is in exactly one worker's store, and the stores hold nothing else
    assert told and sorted(stored) == told
