"""envmatrix search end to end: a fake nccl-tests command probe, and real gloo ranks."""

import json
import os
import signal
import sqlite3
import sys
import time

import pytest
from optuna.trial import TrialState

from conftest import assert_no_processes, processes_with_marker, workers_with_marker
from search_helpers import BEST_1M, fake_conf, gloo_bench_search_conf, load, run_search, search_argv

pytestmark = pytest.mark.slow


def _store_rows(run_dir):
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        return db.execute("SELECT run_key, attempt, sweep_id, result_json FROM results").fetchall()


def test_tpe_finds_known_best_and_forbidden_never_launches(cli, tmp_path):
    out = tmp_path / "run"
    done = run_search(cli, "search", f"conf={fake_conf(tmp_path / 'f.yaml')}", "search.sampler=tpe", "search.confirm_top_k=0",
                      "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    study = load(out)
    best = max(study.get_trials(states=(TrialState.COMPLETE,)), key=lambda t: t.value)
    assert best.params == {**BEST_1M, "NCCL_MAX_NCHANNELS": "8"} and best.value == pytest.approx(120.0)
    assert len([t for t in study.trials if not t.user_attrs.get("forbidden")]) == 12
    rows = _store_rows(out)
    envs = [json.loads(r[3])["intended_env"] for r in rows]
    assert not any(e.get("NCCL_ALGO") == "Tree" and e.get("NCCL_PROTO") == "LL128" for e in envs)
    assert {r[2] for r in rows} == {"search-fake"}
    probed = [t for t in study.trials if t.user_attrs.get("results") and t.user_attrs.get("cached_from") is None]
    assert len(rows) == len(probed) + 1  # + the default-env baseline
    md = (out / "search.md").read_text()
    assert "## default env (empty setup) vs best" in md and "1.364x" in md and "## parameter importances" in md
    assert "optuna-dashboard sqlite:///" in done.stdout
    assert_no_processes(cli.marker)


def test_failures_are_fail_trials_and_export(cli, tmp_path):
    out = tmp_path / "run"
    conf = fake_conf(tmp_path / "f.yaml", forbid=False)
    done = run_search(cli, "search", f"conf={conf}", "search.sampler=bruteforce", "search.baseline=false", "--trials", "40", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    study = load(out)
    fails = study.get_trials(states=(TrialState.FAIL,))
    assert len(fails) == 3 and len(study.get_trials(states=(TrialState.COMPLETE,))) == 15
    for t in fails:
        assert (t.params["NCCL_ALGO"], t.params["NCCL_PROTO"]) == ("Tree", "LL128")
        assert t.user_attrs["failure_class"] == "collective_error" and "invalid usage" in t.user_attrs["root_cause"]
    assert "every allowed combination (18)" in done.stdout
    exp = run_search(cli, "export", "--out", str(out))
    assert exp.returncode == 0, exp.stderr
    sh = (out / "export" / "best.sh").read_text().splitlines()
    assert sh[1:] == ["export NCCL_BUFFSIZE=4194304", "export NCCL_ALGO=Ring", "export NCCL_PROTO=LL128", "export NCCL_MAX_NCHANNELS=8"]
    assert "  best_fake:\n    NCCL_BUFFSIZE: '4194304'\n    NCCL_ALGO: Ring\n" in (out / "export" / "best_setup.yaml").read_text()
    csv = [ln for ln in (out / "export" / "tuner.csv").read_text().splitlines() if not ln.startswith("#")]
    assert csv == ["allreduce,0,16384,ring,ll,8,1,1,-1,-1", "allreduce,16385,1048576,ring,ll128,8,1,1,-1,-1"]
    # max_failure_rate: every trial fails -> the study aborts with exit 1 after 3 failures (the override replaces the
    # whole space, so it names each variable)
    bad = run_search(cli, "search", f"conf={conf}",
                     "search.space={NCCL_ALGO: [Tree], NCCL_PROTO: [LL128], NCCL_MAX_NCHANNELS: [2, 4, 8]}",
                     "search.study_name=bad", "search.baseline=false", "search.max_failure_rate=0.2", "--out", str(tmp_path / "bad"))
    assert bad.returncode == 1 and "max_failure_rate" in bad.stderr


def test_resume_by_study_name_adds_trials(cli, tmp_path):
    out = tmp_path / "run"
    conf = fake_conf(tmp_path / "f.yaml")
    first = run_search(cli, "search", f"conf={conf}", "search.sampler=random", "--trials", "4", "--out", str(out))
    assert first.returncode == 0, first.stderr
    second = run_search(cli, "search", f"conf={conf}", "search.sampler=random", "search.seed=1", "--trials", "7", "--out", str(out))
    assert second.returncode == 0, second.stderr
    assert "baseline:" not in second.stdout  # measured once per study
    study = load(out)
    counted = [t for t in study.trials if not t.user_attrs.get("forbidden")]
    assert len(counted) == 7 and [t.number for t in study.trials] == list(range(len(study.trials)))
    other = run_search(cli, "search", f"conf={conf}", "search.space.NCCL_MAX_NCHANNELS=[2,4]", "--out", str(out))
    assert other.returncode == 2 and "different space" in other.stderr


def test_killed_driver_leaves_no_running_trial(cli, tmp_path):
    out = tmp_path / "run"
    conf = fake_conf(tmp_path / "f.yaml")
    args = ("search", f"conf={conf}", "search.baseline=false", "--trials", "3", "--out", str(out))
    proc = __import__("subprocess").Popen(search_argv(*args), cwd=cli.cwd, env={**cli.env, "FAKE_NCCL_SLEEP": "60"},
                                          stdout=__import__("subprocess").DEVNULL, stderr=__import__("subprocess").DEVNULL)
    deadline = time.time() + 120  # a loaded 2-core CI box starts the driver slowly
    running = []
    while time.time() < deadline and not running:
        time.sleep(0.3)
        # Processes first, then a fresh read: the trial the ranks belong to is the one to kill the driver under
        # (its worker_* attrs come in the transaction that makes it RUNNING: search.ownership.ask_owned).
        if not (out / "study.sqlite").exists() or len(workers_with_marker(cli.marker)) <= 1:
            continue
        try:
            # with params: a trial only asked (a pool server can start before it) has none to retry yet
            running = [t for t in load(out).get_trials(states=(TrialState.RUNNING,))
                       if t.user_attrs.get("worker_pid") == proc.pid and t.params]
        except Exception:  # the driver may hold the write lock or not have created the study yet
            running = []
    assert running, "no trial got under way"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    for pid in processes_with_marker(cli.marker):  # the orphaned fake rank of the killed driver
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # exited between listing and kill
            pass
    assert_no_processes(cli.marker, wait_s=30.0)
    assert running[0].user_attrs["worker_pid"] == proc.pid
    again = run_search(cli, *args)
    assert again.returncode == 0, again.stdout + again.stderr
    study = load(out)
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    lost = study.trials[running[0].number]
    assert lost.state == TrialState.FAIL and lost.user_attrs["failure_class"] == "worker_lost"
    retry = [t for t in study.trials if t.user_attrs.get("retry_of") == lost.number]
    assert len(retry) == 1 and retry[0].state == TrialState.COMPLETE and retry[0].params == lost.params


def test_gloo_builtin_bench_search(cli, tmp_path):
    conf = gloo_bench_search_conf(tmp_path / "g.yaml", "gloo_search", '  space: {TORCH_DISTRIBUTED_DEBUG: ["OFF", INFO]}')
    out = tmp_path / "run"
    done = run_search(cli, "search", f"conf={conf}", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    study = load(out, "gloo_search")
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 2
    assert all(t.value > 0 and "16384" in t.user_attrs["metrics"]["1x2"]["allreduce"] for t in study.trials)
    assert study.user_attrs["baseline"]["values"][0] > 0
    with sqlite3.connect(out / "results.sqlite") as db:
        rows = db.execute("SELECT COUNT(*) FROM metrics WHERE collective='allreduce' AND size_bytes=16384").fetchone()[0]
    # + (2 trials + default) x the confirmation rounds: 3, more (up to 6) while gloo's noise blurs the top two
    conf = study.user_attrs["confirmation"]
    assert 3 <= conf["repeats"] <= 6 and rows == 3 + 3 * conf["repeats"]
    assert {r["label"] for r in conf["ranking"]} == {0, 1, "default"} and all(r["median"] > 0 for r in conf["ranking"])
    assert_no_processes(cli.marker)
