"""A fleet of `envmatrix search` workers on one study when one of them is interrupted (Ctrl-C) or killed while its
probe runs, or dies holding a once-per-study claim: the live workers still fill `--trials`, the dead worker's trial
is failed and its params run again, the baseline is measured once, and no process is left behind."""

import os
import socket
import signal
import subprocess
import time

import pytest
from optuna.trial import TrialState

from conftest import assert_no_processes
from search_helpers import fake_conf, search_argv
from test_search_fleet_e2e import kill, load_fleet, storage_url, wait_paused, worker  # noqa: F401 - storage_url: fixture
from test_search_postgres import postgres_url  # noqa: F401 - the fixture: a PostgreSQL server of this test's own

pytestmark = pytest.mark.slow


@pytest.fixture
def started():
    """Workers this test started; whichever still runs when it ends (a failed assertion) is killed."""
    procs = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
HOST = socket.gethostname()
QUICK = ("search.sampler=random", "search.confirm_top_k=1", "search.confirm_repeats=1", "search.confirm_max_repeats=1")


def budget_trials(study):
    """Finished trials that count toward --trials (neither forbidden, surplus, nor a dead worker's)."""
    return [t for t in study.get_trials(states=(TrialState.COMPLETE, TrialState.FAIL))
            if not t.user_attrs.get("forbidden") and t.user_attrs.get("failure_class") != "worker_lost"]


def wait_for(predicate, what, timeout_s=120.0):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            found = predicate()
        except KeyError:  # the first worker has not created the study yet
            found = None
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def all_done(procs, url):
    """The workers' logs once each has exited 0, and the study they leave."""
    logs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), logs
    return logs, load_fleet(url)


def assert_confirmed_full(study, trials, logs):
    """The study holds the ``trials`` asked for and its verdict ranks every one of them."""
    assert len(budget_trials(study)) == trials, logs
    assert study.user_attrs["confirmation"]["over"] == trials, logs


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl_c", "sigkill"])
def test_a_worker_stopped_mid_probe_leaves_its_peers_to_fill_the_budget(cli, tmp_path, storage_url, sig, started):
    conf = fake_conf(tmp_path / "f.yaml")
    quiet = (*QUICK, "search.baseline=false", "--trials", "6")
    # the victim's probe sleeps 60 s: it is still probing when its two peers have finished the other five trials
    victim = worker(cli, conf, storage_url, tmp_path / "v", *quiet, "search.seed=0", env={"FAKE_NCCL_SLEEP": "60"})
    started.append(victim)
    held = wait_for(lambda: [t for t in load_fleet(storage_url).get_trials(states=(TrialState.RUNNING,))
                             if t.user_attrs.get("worker_pid") == victim.pid and t.user_attrs.get("setup")], "the victim's probe")[0]
    peers = [worker(cli, conf, storage_url, tmp_path / f"w{i}", *quiet, f"search.seed={i}", env={"FAKE_NCCL_SLEEP": "0.3"})
             for i in (1, 2)]
    started.extend(peers)
    wait_for(lambda: len(budget_trials(load_fleet(storage_url))) >= 5, "five finished trials")
    time.sleep(2)  # the peers see the study full (five finished, the victim's running) and act on it
    os.kill(victim.pid, sig)
    victim_log = victim.communicate(timeout=60)[0]
    assert victim.returncode == (130 if sig == signal.SIGINT else -signal.SIGKILL), victim_log
    logs, study = all_done(peers, storage_url)
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING)), "\n".join(logs)
    lost = study.trials[held.number]
    assert lost.state == TrialState.FAIL and lost.user_attrs["failure_class"] == "worker_lost", lost.user_attrs
    retries = [t for t in study.trials if t.user_attrs.get("retry_of") == held.number]
    # the victim's params were measured again by a live peer, and the study holds the six trials asked for
    assert [(t.state, t.params) for t in retries] == [(TrialState.COMPLETE, lost.params)], logs
    assert_confirmed_full(study, 6, logs)
    assert_no_processes(cli.marker)


def test_a_baseline_claimer_killed_after_its_peers_deferred_is_taken_over_by_a_peer(cli, tmp_path, started):
    url = f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    conf = fake_conf(tmp_path / "f.yaml")
    args = (*QUICK, "--trials", "6")
    victim = worker(cli, conf, url, tmp_path / "v", *args, "search.seed=0", env={"ENVMATRIX_TEST_PAUSE_AT": "baseline_claimed"})
    started.append(victim)
    wait_paused(victim)
    peers = [worker(cli, conf, url, tmp_path / f"w{i}", *args, f"search.seed={i}", env={"FAKE_NCCL_SLEEP": "0.3"})
             for i in (1, 2)]
    started.extend(peers)
    # both peers are past their baseline step (a live worker holds the claim: they deferred) and into their trials
    wait_for(lambda: {p.pid for p in peers} <= {t.user_attrs.get("worker_pid") for t in load_fleet(url).trials}, "both peers' trials")
    assert "paused at baseline_claimed" in kill(victim)
    logs, study = all_done(peers, url)
    assert all(f"baseline: worker {HOST}:{victim.pid} has claimed it" in log for log in logs), logs
    # the default env was measured once, by a peer that took the dead worker's claim over
    baseline = study.user_attrs.get("baseline")
    assert baseline and baseline["by"] in {f"worker {HOST}:{p.pid}" for p in peers}, logs
    assert sum(len(list((tmp_path / d).glob("logs/*_baseline_*/*"))) for d in ("v", "w1", "w2")) == 1, logs
    assert len(budget_trials(study)) == 6
    assert_no_processes(cli.marker)


def confirmation_claim(url):
    from envmatrix.search.fleet import CONFIRM_JOB, claim_key
    from envmatrix.search.ownership import study_system_attr

    return study_system_attr(load_fleet(url), claim_key(CONFIRM_JOB))


def test_trials_added_while_the_confirmation_runs_are_confirmed_before_the_fleet_ends(cli, tmp_path, started):
    url = f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    conf = fake_conf(tmp_path / "f.yaml")
    args = ("search.sampler=random", "search.baseline=false")
    # the first worker's confirmation takes ~12 s (4 labels x 3 rounds of a 1 s probe): a second worker, resuming the
    # study with a larger --trials, adds two trials meanwhile and reaches the confirmation before its verdict is out
    first = worker(cli, conf, url, tmp_path / "w1", *args, "search.seed=1", "--trials", "4", env={"FAKE_NCCL_SLEEP": "1"})
    started.append(first)
    wait_for(lambda: confirmation_claim(url), "the first worker's confirmation claim")
    second = worker(cli, conf, url, tmp_path / "w2", *args, "search.seed=2", "--trials", "6")
    started.append(second)
    logs, study = all_done((first, second), url)
    # the verdict export reads ranks all six trials, not the four there were when the first confirmation began
    assert_confirmed_full(study, 6, logs)
    assert_no_processes(cli.marker)


def test_a_worker_started_later_under_budget_s_stops_with_its_peer_and_the_verdict_is_confirmed_once(cli, tmp_path, started):
    from envmatrix.search.fleet import BUDGET_KEY
    from envmatrix.search.ownership import study_system_attr
    from test_search_fleet_e2e import confirm_probes

    url = f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    conf = fake_conf(tmp_path / "f.yaml")
    args = (*QUICK, "search.baseline=false", "search.budget_s=20", "--trials", "1000")
    # 3 s probes: the two workers' trials stay inside the fake space's 21 allowed combinations; the window leaves a
    # loaded machine 15 s to start the second worker
    first = worker(cli, conf, url, tmp_path / "w1", *args, "search.seed=1", env={"FAKE_NCCL_SLEEP": "3"})
    started.append(first)
    wait_for(lambda: load_fleet(url).trials, "the first worker's trials")
    time.sleep(2)
    second = worker(cli, conf, url, tmp_path / "w2", *args, "search.seed=2", env={"FAKE_NCCL_SLEEP": "3"})
    started.append(second)
    logs, study = all_done((first, second), url)
    deadline = study_system_attr(study, BUDGET_KEY)["deadline"]
    asked = [[t.datetime_start.timestamp() for t in budget_trials(study) if t.user_attrs["worker_pid"] == p.pid]
             for p in (first, second)]
    # the second worker started later (on its own budget it would ask past the study's window), asked within it,
    # and stopped at the same deadline as its peer
    assert asked[0] and asked[1] and min(asked[1]) > min(asked[0]) + 1, (asked, logs)
    assert max(asked[0] + asked[1]) <= deadline + 0.5, (deadline, asked, logs)
    assert sorted(confirm_probes(tmp_path / w) > 0 for w in ("w1", "w2")) == [False, True], logs  # confirmed once
    assert_confirmed_full(study, len(budget_trials(study)), logs)
    assert_no_processes(cli.marker)


def test_a_confirmer_killed_after_its_peers_deferred_is_taken_over_by_a_peer(cli, tmp_path, started):
    url = f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    conf = fake_conf(tmp_path / "f.yaml")
    args = (*QUICK, "search.baseline=false", "--trials", "4")
    victim = worker(cli, conf, url, tmp_path / "v", *args, "search.seed=0", env={"ENVMATRIX_TEST_PAUSE_AT": "confirm_claimed"})
    started.append(victim)
    wait_paused(victim)
    peers = [worker(cli, conf, url, tmp_path / f"w{i}", *args, f"search.seed={i}") for i in (1, 2)]
    started.extend(peers)
    time.sleep(12)  # both peers find the study full and the confirmation claimed by a live worker
    assert "paused at confirm_claimed" in kill(victim)
    logs, study = all_done(peers, url)
    assert all(f"confirmation: worker {HOST}:{victim.pid} has claimed it" in log for log in logs), logs
    verdict = study.user_attrs.get("confirmation")
    assert verdict and verdict["by"] in {f"worker {HOST}:{p.pid}" for p in peers} and verdict["over"] == 4, logs
    assert_no_processes(cli.marker)


@pytest.mark.parametrize("sig, said", [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")], ids=["ctrl_c", "sigterm"])
def test_a_worker_interrupted_mid_probe_hands_its_trial_back_itself(cli, tmp_path, started, sig, said):
    # peers on other hosts cannot see that its pid is gone: they would wait heartbeat_grace_s (300 s) for its retry;
    # SIGTERM is what Slurm's scancel sends a worker before its SIGKILL
    url = f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    conf = fake_conf(tmp_path / "f.yaml")
    victim = worker(cli, conf, url, tmp_path / "v", *QUICK, "search.baseline=false", "--trials", "3",
                    env={"FAKE_NCCL_SLEEP": "60"})
    started.append(victim)
    held = wait_for(lambda: [t for t in load_fleet(url).get_trials(states=(TrialState.RUNNING,)) if t.user_attrs.get("setup")],
                    "the victim's probe")[0]
    os.kill(victim.pid, sig)
    log = victim.communicate(timeout=60)[0]
    assert victim.returncode == 130 and ("interrupted" if sig == signal.SIGINT else "stopped by SIGTERM") in log, log
    study = load_fleet(url)
    lost = study.trials[held.number]
    assert lost.state == TrialState.FAIL and lost.user_attrs["failure_class"] == "worker_lost", lost.user_attrs
    assert lost.user_attrs["root_cause"] == f"worker {HOST}:{victim.pid} was interrupted ({said})"
    (retry,) = study.get_trials(states=(TrialState.WAITING,))
    assert retry.user_attrs["retry_of"] == held.number and retry.system_attrs["fixed_params"] == lost.params
    assert_no_processes(cli.marker)


def test_a_confirmer_interrupted_mid_confirmation_lets_a_peer_on_another_host_take_over_at_once(cli, tmp_path, started):
    from envmatrix.search import fleet
    from envmatrix.search.study import Worker

    url = f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    conf = fake_conf(tmp_path / "f.yaml")
    victim = worker(cli, conf, url, tmp_path / "v", "search.sampler=random", "search.baseline=false", "--trials", "2",
                    env={"FAKE_NCCL_SLEEP": "2"})
    started.append(victim)
    wait_for(lambda: fleet.study_system_attr(load_fleet(url), fleet.beat_key(fleet.CONFIRM_JOB)), "the confirmation's beat")
    os.kill(victim.pid, signal.SIGINT)
    log = victim.communicate(timeout=60)[0]
    assert victim.returncode == 130 and "envmatrix: interrupted" in log, log
    # a worker on another host cannot see the pid is gone; the claim's beat is fresh, yet the claim is free
    elsewhere = fleet.claim(load_fleet(url), fleet.CONFIRM_JOB, Worker("elsewhere", 1, None), grace_s=300)
    assert elsewhere.role.kind == fleet.TAKE_OVER, elsewhere.role
    assert elsewhere.role.reason == f"worker {HOST}:{victim.pid} claimed it, but it was interrupted (Ctrl-C)"
    assert_no_processes(cli.marker)


def test_a_worker_silent_past_the_grace_finds_its_trial_failed_and_goes_on(cli, tmp_path, started):
    url = f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    conf = fake_conf(tmp_path / "f.yaml")
    args = (*QUICK, "search.baseline=false", "search.heartbeat_interval_s=0.5", "search.heartbeat_grace_s=3", "--trials", "6")
    victim = worker(cli, conf, url, tmp_path / "v", *args, "search.seed=0", env={"FAKE_NCCL_SLEEP": "6"})
    started.append(victim)
    held = wait_for(lambda: [t for t in load_fleet(url).get_trials(states=(TrialState.RUNNING,))
                             if t.user_attrs.get("worker_pid") == victim.pid and t.user_attrs.get("setup")], "the victim's probe")[0]
    os.kill(victim.pid, signal.SIGSTOP)  # a stalled host: no heartbeat, its probe goes on
    peers = [worker(cli, conf, url, tmp_path / f"w{i}", *args, f"search.seed={i}", env={"FAKE_NCCL_SLEEP": "0.3"})
             for i in (1, 2)]
    started.extend(peers)
    wait_for(lambda: load_fleet(url).trials[held.number].state == TrialState.FAIL, "the peers to fail the silent trial")
    os.kill(victim.pid, signal.SIGCONT)
    logs = [p.communicate(timeout=180)[0] for p in (victim, *peers)]
    assert [p.returncode for p in (victim, *peers)] == [0, 0, 0], logs[0][-3000:]
    assert f"trial {held.number} was failed by another worker while this one probed (no heartbeat" in logs[0], logs[0]
    study = load_fleet(url)
    lost = study.trials[held.number]
    assert lost.state == TrialState.FAIL and "no heartbeat" in lost.user_attrs["root_cause"], lost.user_attrs
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    assert_confirmed_full(study, 6, logs)
    assert_no_processes(cli.marker)


def test_a_confirmer_that_finds_nothing_to_confirm_frees_its_claim(cli, tmp_path):
    from envmatrix.search import fleet
    from envmatrix.search.study import Worker

    url = f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    conf = tmp_path / "failing.yaml"  # one combination, which the fake nccl-tests fails: no trial completes
    conf.write_text(fake_conf(tmp_path / "f.yaml", forbid=False).read_text()
                    .replace("space: {NCCL_ALGO: [Ring, Tree], NCCL_PROTO: all, NCCL_MAX_NCHANNELS: [2, 4, 8]}",
                             "space: {NCCL_ALGO: [Tree], NCCL_PROTO: [LL128]}"))
    done = subprocess.run(search_argv("search", f"conf={conf}", f"search.storage='{url}'", "search.study_name=fleet",
                                      "search.baseline=false", "search.max_failure_rate=1", "--trials", "2",
                                      "--out", str(tmp_path / "w1")), cwd=cli.cwd, env=cli.env, capture_output=True, text=True, timeout=240)
    # every trial failed: exit 1 (failures found), the claim freed all the same
    assert done.returncode == 1 and "confirmation" not in load_fleet(url).user_attrs, done.stdout + done.stderr
    # a waiting peer on another host cannot see the pid is gone: the claim must say it is free, not wait out the grace
    elsewhere = fleet.claim(load_fleet(url), fleet.CONFIRM_JOB, Worker("elsewhere", 1, None), grace_s=300)
    assert elsewhere.role.kind == fleet.TAKE_OVER and "found no completed trial to confirm" in elsewhere.role.reason, elsewhere.role
    assert_no_processes(cli.marker)
