"""Two workers on one study with the plan samplers (structured descent, scale plan): a peer's trial asked just before
ours, whose params are not in the storage yet, is not proposed the same row."""

import subprocess

import optuna
import pytest
from optuna.trial import TrialState

from envmatrix.catalog import load_catalog
from envmatrix.search.space import parse_search_space
from envmatrix.search.study import make_sampler
from search_helpers import load, search_argv
from test_search_plan_resume import _conf as plan_conf

optuna.logging.set_verbosity(optuna.logging.WARNING)

SMALL = {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": ["LL", "LL128", "Simple"], "NCCL_MAX_NCHANNELS": [2, 4, 8]}
LARGE = {**SMALL, "NCCL_MIN_NCHANNELS": [None, 2, 4, 8, 16], "NCCL_BUFFSIZE": [None, 1048576, 4194304, 16777216],
         "NCCL_NTHREADS": [None, 128, 256, 512], "NCCL_SOCKET_NTHREADS": [None, 1, 2, 4, 8]}


@pytest.mark.parametrize("values", [SMALL, LARGE], ids=["descent", "scale"])
def test_peer_trial_without_params_yet_is_not_proposed_twice(tmp_path, values):
    space = parse_search_space({"space": values}, load_catalog(), {}, "t: search")
    url = f"sqlite:///{tmp_path / 'study.sqlite'}"
    first = optuna.create_study(storage=url, study_name="s", direction="maximize",
                                sampler=make_sampler("structured", 0, space.size, space))
    for _ in range(3):  # a few rows measured, so the plan is past its first row
        t = first.ask()
        first.tell(t, float(sum(space.suggest(t))))
    peer = optuna.load_study(storage=url, study_name="s", sampler=make_sampler("structured", 0, space.size, space))
    # two workers ask at once: both trials RUNNING, each worker's sampler plans while the other's params are not
    # (all) written yet -- Optuna writes a trial's params one suggest at a time
    early, late = first.ask(), peer.ask()
    var, vals = space.vars[0], list(space.space.values[0])
    late.suggest_categorical(var, vals)  # late's sampler has planned its row, one param of it stored
    early_row = space.suggest(early)
    assert early_row != space.suggest(late)


@pytest.mark.slow
def test_two_workers_measure_each_row_once_and_fill_the_budget(cli, tmp_path):
    conf = plan_conf(tmp_path / "f.yaml")  # the resume test's 48-row space
    out = tmp_path / "run"
    workers = [subprocess.Popen(search_argv("search", f"conf={conf}", "--trials", "30", "--out", str(out)), cwd=cli.cwd, env=cli.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    for w in workers:
        log = w.communicate(timeout=240)[0]
        assert w.returncode == 0, log
    trials = [t for t in load(out).trials if t.state in (TrialState.COMPLETE, TrialState.FAIL)]
    assert len(trials) == 30 and len({t.user_attrs["worker_pid"] for t in trials}) == 2
    probed = [tuple(sorted(t.params.items())) for t in trials if t.user_attrs.get("cached_from") is None]
    assert len(probed) == len(set(probed)), "a row measured twice"
