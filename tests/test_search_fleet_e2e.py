"""A fleet of `envmatrix search` worker processes on one study: the confirmation runs once per study, a worker
SIGKILLed right after it took a trial leaves that trial owned (the next worker fails it at once), a confirmer
killed after its claim is taken over, and every trial's ranks come from the one warm pool."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import time

import pytest
from optuna.trial import TrialState

from conftest import assert_no_processes, processes_with_marker
from envmatrix.search.fleet import CONFIRM_JOB, claim_key
from envmatrix.search.ownership import study_system_attr
from search_helpers import fake_conf, gloo_bench_search_conf, run_search, search_argv
from test_search_postgres import postgres_url  # noqa: F401 - the fixture: a PostgreSQL server of this test's own

pytestmark = pytest.mark.slow
HOST = socket.gethostname()
ENQUEUED = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "2"}


def worker(cli, conf, url, out, *args, env=None):
    argv = search_argv("search", f"conf={conf}", f"search.storage='{url}'", "search.study_name=fleet", *args, "--out", str(out))
    return subprocess.Popen(argv, cwd=cli.cwd, env={**cli.env, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def load_fleet(url):
    import optuna

    return optuna.load_study(study_name="fleet", storage=url)


def confirm_probes(out):
    """Confirmation measurements this worker launched: one log directory per attempt of each confirm round."""
    return len(list(out.glob("logs/*_confirm*/*")))


def wait_paused(proc, timeout_s=120.0):
    """Until the worker stopped itself at its ENVMATRIX_TEST_PAUSE_AT point (state T in /proc/<pid>/stat)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        with open(f"/proc/{proc.pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.1)
    raise AssertionError("the worker never reached its pause point")


def kill(proc):
    os.kill(proc.pid, signal.SIGKILL)
    return proc.communicate(timeout=30)[0]


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    return request.getfixturevalue("postgres_url")


def test_three_workers_confirm_once(cli, tmp_path, storage_url):
    conf = fake_conf(tmp_path / "f.yaml")
    outs = [tmp_path / f"w{i}" for i in range(3)]
    # each probe takes 0.3 s, so the workers' trials overlap and they reach the confirmation at different times
    procs = [worker(cli, conf, storage_url, out, "search.sampler=random", f"search.seed={i}", "--trials", "9",
                    env={"FAKE_NCCL_SLEEP": "0.3"}) for i, out in enumerate(outs)]
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], logs
    study = load_fleet(storage_url)
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    verdict = study.user_attrs["confirmation"]
    confirmer = next(i for i, p in enumerate(procs) if verdict["by"].endswith(f":{p.pid}"))
    measured = sum(len(r["values"]) + r["failed"] for r in verdict["ranking"])
    assert measured == 4 * 3  # the three best trials and the default env, three rounds (the fake probe is exact)
    assert [confirm_probes(out) for out in outs] == [measured if i == confirmer else 0 for i in range(3)], logs
    assert sum(len(list(out.glob("logs/*_baseline_*/*"))) for out in outs) == 1, logs  # the default env: once too
    assert study.user_attrs["baseline"]["by"] in {f"worker {HOST}:{p.pid}" for p in procs}
    # every finished trial of the budget was ranked; a forbidden sample (Tree with LL128) fails without counting
    budget = [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.FAIL) and not t.user_attrs.get("forbidden")]
    assert verdict["over"] == len(budget) == 9
    for i, log in enumerate(logs):
        if i == confirmer:
            assert "confirmed after 3 rounds" in log, log
        else:  # it deferred to the confirmer, or came after it and shows its verdict
            assert (f"confirmation: {verdict['by']} has claimed it" in log
                    or f"confirmation: {verdict['by']} has done it over" in log and "confirmed after 3 rounds" in log), log
    assert_no_processes(cli.marker)


@pytest.mark.parametrize("enqueued", [False, True], ids=["new_trial", "enqueued_trial"])
def test_worker_killed_right_after_ask_leaves_an_owned_trial_the_next_worker_fails(cli, tmp_path, enqueued):
    url = f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    conf = fake_conf(tmp_path / "f.yaml")
    quiet = ("search.baseline=false", "search.confirm_top_k=0")
    if enqueued:  # a study holding one trial, and one trial queued for the next worker to take
        first = worker(cli, conf, url, tmp_path / "w0", *quiet, "--trials", "1")
        assert first.wait(timeout=240) == 0, first.communicate()[0]
        load_fleet(url).enqueue_trial(ENQUEUED)
    victim = worker(cli, conf, url, tmp_path / "w1", *quiet, "--trials", "3", env={"ENVMATRIX_TEST_PAUSE_AT": "asked"})
    wait_paused(victim)
    assert "paused at asked" in kill(victim)
    running = load_fleet(url).get_trials(states=(TrialState.RUNNING,))
    # the trial and its owner were one write: no RUNNING trial without a worker, and this one names the dead one
    assert [t.user_attrs.get("worker_pid") for t in running] == [victim.pid]
    assert enqueued == (running[0].system_attrs.get("fixed_params") == ENQUEUED)
    lost = running[0].number
    started = time.time()
    nxt = run_search(cli, "search", f"conf={conf}", f"search.storage='{url}'", "search.study_name=fleet", *quiet,
                     "--trials", "3", "--out", str(tmp_path / "w2"))
    assert nxt.returncode == 0, nxt.stdout + nxt.stderr
    assert "recovered 1 stale trials" in nxt.stdout and time.time() - started < 200  # at once, not after the 300 s grace
    study = load_fleet(url)
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    failed = study.trials[lost]
    assert failed.state == TrialState.FAIL and failed.user_attrs["failure_class"] == "worker_lost"
    assert "is gone" in failed.user_attrs["root_cause"]
    retries = [t for t in study.trials if t.user_attrs.get("retry_of") == lost]
    if enqueued:  # the queued params were not lost with the worker: the next one ran them
        assert [(t.state, t.params) for t in retries] == [(TrialState.COMPLETE, ENQUEUED)]
    else:  # killed before it sampled anything: nothing to retry
        assert not retries
    assert_no_processes(cli.marker)


def test_a_confirmer_killed_after_its_claim_is_taken_over(cli, tmp_path):
    url = f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    conf = fake_conf(tmp_path / "f.yaml")
    first = worker(cli, conf, url, tmp_path / "w1", "--trials", "4", env={"ENVMATRIX_TEST_PAUSE_AT": "confirm_claimed"})
    wait_paused(first)
    assert "paused at confirm_claimed" in kill(first)
    claim = study_system_attr(load_fleet(url), claim_key(CONFIRM_JOB))
    assert claim["worker_pid"] == first.pid and "confirmation" not in load_fleet(url).user_attrs
    second = worker(cli, conf, url, tmp_path / "w2", "--trials", "4")
    log = second.communicate(timeout=240)[0]
    assert second.returncode == 0, log
    assert f"confirmation: worker {claim['worker_host']}:{first.pid} claimed it, but worker" in log
    assert "is gone: this worker takes it over" in log
    verdict = load_fleet(url).user_attrs["confirmation"]
    assert verdict["by"].endswith(f":{second.pid}") and verdict["claim"] != claim["id"]
    assert confirm_probes(tmp_path / "w1") == 0 and confirm_probes(tmp_path / "w2") == 4 * 3
    assert_no_processes(cli.marker)


def test_search_trials_use_the_warm_pool(cli, tmp_path):
    keys = '  space: {TORCH_DISTRIBUTED_DEBUG: ["OFF", INFO, DETAIL]}\n  confirm_top_k: 1'
    conf = gloo_bench_search_conf(tmp_path / "g.yaml", "pool_search", keys)
    out = tmp_path / "run"
    proc = subprocess.Popen(search_argv("search", f"conf={conf}", "--trials", "3", "--out", str(out)), cwd=cli.cwd,
                            env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    servers, ranks = set(), set()
    while proc.poll() is None:  # every pool server this search starts lives until its end: sampled twice a second
        for pid in processes_with_marker(cli.marker):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    pooled = b"envmatrix.execution.pool_server" in fh.read()
                with open(f"/proc/{pid}/stat") as fh:
                    parent = int(fh.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if pooled:  # a server is the driver's child; a rank forked from it shows the server's command line
                (servers if parent == proc.pid else ranks).add(pid)
        time.sleep(0.5)
    log = proc.communicate()[0]
    assert proc.returncode == 0, log
    with sqlite3.connect(out / "results.sqlite") as db:
        results = [json.loads(r) for (r,) in db.execute("SELECT result_json FROM results")]
    starts = [k["versions"]["start"] for r in results for k in r["ranks"]]
    # 3 trials + the baseline + 2 labels x the confirm rounds, 2 ranks each: all forked from the same 2 servers
    assert len(results) >= 3 + 1 + 2 * 3 and set(starts) == {"pooled"}, starts
    assert len(servers) == 2, (servers, ranks)
    assert f"warm pool: {len(starts)} ranks forked from warm servers, 0 started cold" in log
    assert_no_processes(cli.marker)
