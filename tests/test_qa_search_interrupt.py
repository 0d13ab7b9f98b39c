"""QA pass on an interrupted search worker: Ctrl-C or SIGTERM between a trial's ask and its probe (a Ctrl-C a moment
after "trial N" started) hands the trial back as the probe's interrupt does, so a peer on another host, which cannot
see that the pid is gone, need not wait heartbeat_grace_s for it. Real worker processes, the fake nccl-tests."""

import os
import signal

import pytest
from optuna.trial import TrialState

from conftest import assert_no_processes
from search_helpers import fake_conf
from test_search_fleet_e2e import HOST, load_fleet, wait_paused, worker

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("sig, said", [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")], ids=["ctrl_c", "sigterm"])
def test_a_worker_interrupted_right_after_its_ask_hands_the_trial_back(cli, tmp_path, sig, said):
    url = f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    victim = worker(cli, fake_conf(tmp_path / "f.yaml"), url, tmp_path / "v", "search.baseline=false",
                    "search.confirm_top_k=0", "--trials", "2", env={"ENVMATRIX_TEST_PAUSE_AT": "asked"})
    try:
        wait_paused(victim)  # stopped where the trial and its owner were just written, before the probe
        os.kill(victim.pid, sig)  # delivered when it runs again
        os.kill(victim.pid, signal.SIGCONT)
        log = victim.communicate(timeout=120)[0]
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.communicate(timeout=30)
    assert victim.returncode == 130, log
    study = load_fleet(url)
    assert not study.get_trials(states=(TrialState.RUNNING,)), [t.user_attrs for t in study.trials]
    lost = study.trials[0]
    assert lost.state == TrialState.FAIL and lost.user_attrs["failure_class"] == "worker_lost", lost.user_attrs
    assert lost.user_attrs["root_cause"] == f"worker {HOST}:{victim.pid} was interrupted ({said})"
    assert_no_processes(cli.marker)
