"""`envmatrix export` on a study its workers are still working on: it writes the best so far, says what is still under
way (trials running, a confirmation claimed and not written) and exits 3 (inconclusive); once they are done, the
confirmed winner and exit 0. Real worker processes, the fake nccl-tests at the process boundary."""

import os
import signal
import socket
import subprocess

import pytest
from optuna.trial import TrialState

from conftest import assert_no_processes
from search_helpers import fake_conf, search_argv
from test_search_fleet_e2e import load_fleet, wait_paused, worker
from test_search_fleet_kill import QUICK, wait_for

pytestmark = pytest.mark.slow


def export(cli, url, dest):
    return subprocess.run(search_argv("export", "--storage", url, "--study-name", "fleet", "--dest", str(dest)),
                          cwd=cli.cwd, env=cli.env, capture_output=True, text=True, timeout=120)


def test_export_while_the_workers_run_is_the_best_so_far_and_inconclusive(cli, tmp_path):
    url = f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    conf = fake_conf(tmp_path / "f.yaml")
    proc = worker(cli, conf, url, tmp_path / "w", *QUICK, "search.baseline=false", "--trials", "3",
                  env={"FAKE_NCCL_SLEEP": "4", "ENVMATRIX_TEST_PAUSE_AT": "confirm_claimed"})
    try:
        wait_for(lambda: [t for t in load_fleet(url).trials if t.state == TrialState.COMPLETE]
                 and load_fleet(url).get_trials(states=(TrialState.RUNNING,)), "a finished trial and a running one")
        mid = export(cli, url, tmp_path / "mid")
        assert mid.returncode == 3, mid.stdout + mid.stderr
        assert "not final, the study is still under way (1 trials running and 0 queued" in mid.stdout, mid.stdout
        assert "not confirmed" not in mid.stdout and "NOT FINAL" in (tmp_path / "mid" / "best.sh").read_text()

        wait_paused(proc)  # it claimed the confirmation and stopped there
        claimed = export(cli, url, tmp_path / "claimed")
        assert claimed.returncode == 3, claimed.stdout + claimed.stderr
        assert f"confirmation: worker {socket.gethostname()}:{proc.pid} has claimed it" in claimed.stdout, claimed.stdout
        os.kill(proc.pid, signal.SIGCONT)
        log = proc.communicate(timeout=120)[0]
        assert proc.returncode == 0, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    done = export(cli, url, tmp_path / "done")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "confirmed" in (tmp_path / "done" / "best.sh").read_text() and "not final" not in done.stdout
    assert_no_processes(cli.marker)
