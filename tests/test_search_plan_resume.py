"""The structured plan resumed after a kill proposes the rows an uninterrupted run proposes (real CLI processes,
the fake nccl-tests at the process boundary: busbw a function of the env)."""

import os
import signal
import subprocess
import sys
import time

import pytest
from optuna.trial import TrialState

from conftest import assert_no_processes, processes_with_marker, workers_with_marker
from search_helpers import FAKE, load, run_search, search_argv

pytestmark = pytest.mark.slow

TRIALS = "24"


def _conf(path):
    """2 x 4 x 3 x 2 = 48 rows: 24 trials reach the expansion step past the descent, which chooses among ties."""
    path.write_text(f"""
name: fake
backend: gloo
grids: [1x1]
probe: {{name: command, timeout_s: 90, command: [{sys.executable}, {FAKE}]}}
search:
  seed: 0
  sampler: structured
  baseline: false
  confirm_top_k: 0
  max_failure_rate: 0.9
  space: {{NCCL_ALGO: [Ring, Tree], NCCL_PROTO: all, NCCL_MAX_NCHANNELS: [2, 4, 8], NCCL_BUFFSIZE: [1048576, 4194304]}}
  objective: {{collective: allreduce, size: 1M}}
""")
    return path


def _args(conf, out):
    return ("search", f"conf={conf}", "--trials", TRIALS, "--out", str(out))


def _rows(out):
    """(state, params) of every trial but the ones a killed worker lost, in trial order."""
    return [(t.state, t.params) for t in load(out).trials if t.user_attrs.get("failure_class") != "worker_lost"]


def _kill_mid_trial(cli, args, out, sig):
    """Start the search with a slow probe, and signal the driver once a trial with its params is running."""
    proc = subprocess.Popen(search_argv(*args), cwd=cli.cwd, env={**cli.env, "FAKE_NCCL_SLEEP": "60"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline, running = time.time() + 120, []
    while time.time() < deadline and not running:
        time.sleep(0.3)
        if not (out / "study.sqlite").exists() or len(workers_with_marker(cli.marker)) <= 1:
            continue
        try:
            running = [t for t in load(out).get_trials(states=(TrialState.RUNNING,)) if t.params]
        except Exception:  # the driver may hold the write lock or not have created the study yet
            running = []
    assert running, "no trial got under way"
    if sig == signal.SIGKILL:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its probe, as a lost node takes them
    else:
        os.kill(proc.pid, sig)
    proc.wait(timeout=120)
    for pid in processes_with_marker(cli.marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # exited between listing and kill
            pass
    assert_no_processes(cli.marker, wait_s=30.0)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["sigkill", "ctrl-c"])
def test_resumed_descent_proposes_the_uninterrupted_rows(cli, tmp_path, sig):
    conf = _conf(tmp_path / "f.yaml")
    ref = tmp_path / "ref"
    done = run_search(cli, *_args(conf, ref))
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / "run"
    first = run_search(cli, "search", f"conf={conf}", "--trials", "3", "--out", str(out))
    assert first.returncode == 0, first.stdout + first.stderr
    _kill_mid_trial(cli, _args(conf, out), out, sig)
    again = run_search(cli, *_args(conf, out))
    assert again.returncode == 0, again.stdout + again.stderr
    assert any(t.user_attrs.get("failure_class") == "worker_lost" for t in load(out).trials)
    assert _rows(out) == _rows(ref) and len(_rows(ref)) == int(TRIALS)
