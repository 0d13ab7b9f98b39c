"""search: space, objectives, stale-trial recovery and export, without processes."""

import threading
import time

import optuna
import pytest
from optuna.trial import TrialState

from envmatrix.catalog import load_catalog
from envmatrix.errors import ConfigError
from envmatrix.search.export import _single, setup_yaml, tuner_rows, TUNER_ALGOS
from envmatrix.search.objective import Objective, evaluate, MissingMetric, parse_objectives
from envmatrix.search.space import SearchSpace, parse_search_space
from envmatrix.search.study import (
    STUDY_ATTR, WORKER_LOST, SearchAborted, SearchSettings, parse_settings, recover_stale, run_search,
)
from envmatrix.search.objective import EvalOutcome

optuna.logging.set_verbosity(optuna.logging.WARNING)
SPACE = {"space": {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": "all"}, "forbid": [{"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL128"}],
         "fixed": {"NCCL_BUFFSIZE": 4194304}}


def space():
    return parse_search_space(SPACE, load_catalog(), {}, "t.yaml: search")


def test_space_from_catalog_fixed_and_forbid():
    s = space()
    assert s.vars == ("NCCL_ALGO", "NCCL_PROTO") and s.choices("NCCL_PROTO") == ("LL", "LL128", "Simple")
    assert s.size == 6 and len(s.allowed_rows()) == 5
    setup = s.setup_of_params({"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"})
    assert setup.assignments() == {"NCCL_BUFFSIZE": "4194304", "NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}
    assert SearchSpace.from_json(s.to_json()) == s
    assert "NCCL_ALGO: Ring" in setup_yaml(setup, "best")


@pytest.mark.parametrize("bad, text", [
    ({"space": {"NCCL_ALGO": ["Rung"]}}, "Rung"),
    ({"space": {"NCCL_NVLS_ENABLE": [0, 1]}}, "safety pin"),
    ({"space": {"NCCL_ALGO": ["Ring"]}, "fixed": {"NCCL_ALGO": "Tree"}}, "either fixed or searched"),
    ({"space": {"NCCL_ALGO": ["Ring"]}, "forbid": [{"NCCL_ALGO": "Ring"}]}, "nothing left"),
    ({}, "non-empty mapping"),
])
def test_space_errors_are_one_line(bad, text):
    with pytest.raises(ConfigError, match=text):
        parse_search_space(bad, load_catalog(), {}, "t.yaml: search")


@pytest.mark.parametrize("bad, pins, line", [
    # the key as written in the file: parse_space's own "vars" and check_pins' "setups.fixed" were named before
    ({"space": {"NCCL_ALGO": []}}, {}, "^t.yaml: search.space.NCCL_ALGO: empty list"),
    ({"space": {"NCCL_NVLS_ENABLE": [0, 1]}}, {}, "^t.yaml: search.space.NCCL_NVLS_ENABLE: NCCL_NVLS_ENABLE is a safety pin"),
    ({"space": {"NCCL_ALGO": ["Ring"]}, "fixed": {"NCCL_NVLS_ENABLE": 1}}, {"NCCL_NVLS_ENABLE": "0"},
     "^t.yaml: search.fixed.NCCL_NVLS_ENABLE: NCCL_NVLS_ENABLE=1 would override the safety pin NCCL_NVLS_ENABLE=0 "
     "set by the caller; allowed: NCCL_NVLS_ENABLE=0 or leaving NCCL_NVLS_ENABLE out$"),
    # the caller pinned nothing: a fixed value still may not turn NVLink multicast on
    ({"space": {"NCCL_ALGO": ["Ring"]}, "fixed": {"NCCL_NVLS_ENABLE": 1}}, {},
     "^t.yaml: search.fixed.NCCL_NVLS_ENABLE: NCCL_NVLS_ENABLE=1 would turn NVLink multicast on, which envmatrix never "
     "does .*; allowed: NCCL_NVLS_ENABLE=0 or leaving NCCL_NVLS_ENABLE out$"),
])
def test_space_errors_name_the_key_written(bad, pins, line):
    with pytest.raises(ConfigError, match=line):
        parse_search_space(bad, load_catalog(), pins, "t.yaml: search")


def test_settings_and_objective_errors():
    with pytest.raises(ConfigError, match="did you mean trials"):
        parse_settings({"trails": 3}, "search", "n", 0)
    with pytest.raises(ConfigError, match="sampler"):
        parse_settings({"sampler": "cmaes"}, "search", "n", 0)
    # a grace within two beats reads a live worker as dead, and its peers re-run the trial it is still measuring
    for grace, interval in ((5, 10), (20, 10), (1, 0.5)):
        with pytest.raises(ConfigError, match=rf"^search.heartbeat_grace_s: {grace} is not more than twice heartbeat_interval_s"):
            parse_settings({"heartbeat_grace_s": grace, "heartbeat_interval_s": interval}, "search", "n", 0)
    assert parse_settings({"heartbeat_grace_s": 3, "heartbeat_interval_s": 0.5}, "search", "n", 0).heartbeat_grace_s == 3
    with pytest.raises(ConfigError, match="allreduse"):
        parse_objectives({"collective": "allreduse"}, "search.objective", ["1x2"])
    # a weight on a collective or size the objective never measures weighed nothing, and the search ran
    for weights in ({"allreduse": 2}, {"1M": 3}, {"alltoall@1K": 2}):
        with pytest.raises(ConfigError, match=rf"^o.weights.{list(weights)[0]}: weighs nothing this objective measures; "
                                              r"allowed: one of its collectives or sizes \(allreduce, 1K\)"):
            parse_objectives({"collective": "allreduce", "size": "1K", "weights": weights}, "o", ["1x2"])
    (ok,) = parse_objectives({"collective": "allreduce", "size": ["1K", "1M"], "weights": {"1M": 3, "allreduce@1K": 2,
                                                                                        "allreduce": 1}}, "o", ["1x2"])
    assert ok.weight("allreduce", 1 << 20) == 3 and ok.weight("allreduce", 1024) == 2
    assert parse_objectives({"weights": {"64M": 2}}, "o", ["1x2"])[0].weight("allreduce", 64 << 20) == 2  # size: max


def test_weighted_geometric_mean_and_multi_objective():
    rows = [{"collective": "allreduce", "size_bytes": 1024, "busbw_gbps": 10.0, "time_us": 5.0},
            {"collective": "allreduce", "size_bytes": 1 << 20, "busbw_gbps": 40.0, "time_us": 50.0},
            {"collective": "alltoall", "size_bytes": 1 << 20, "busbw_gbps": 20.0, "time_us": 80.0}]
    (o,) = parse_objectives({"collective": "allreduce", "size": ["1K", "1M"], "weights": {"1M": 3}}, "o", ["1x2"])
    assert evaluate(o, {"1x2": rows}) == pytest.approx((10 * 40 ** 3) ** 0.25)
    objs = parse_objectives([{"collective": "allreduce", "size": "max"}, {"collective": "alltoall", "size": "1M", "metric": "time"}], "o", ["1x2"])
    assert [o.direction for o in objs] == ["maximize", "minimize"]
    assert [evaluate(o, {"1x2": rows}) for o in objs] == pytest.approx([40.0, 80.0])
    with pytest.raises(MissingMetric, match="no allgather row"):
        evaluate(parse_objectives({"collective": "allgather"}, "o", ["1x2"])[0], {"1x2": rows})


def settings(**kw):
    base = dict(trials=8, sampler="random", seed=0, storage=None, study_name="u", max_failure_rate=0.5,
                heartbeat_interval_s=5.0, heartbeat_grace_s=60.0, top_k=5, baseline=False, max_forbidden_streak=50)
    return SearchSettings(**{**base, **kw})


def new_study(s, sampler=None):
    study = optuna.create_study(sampler=sampler or optuna.samplers.RandomSampler(seed=0))
    study.set_user_attr(STUDY_ATTR, {"space": s.to_json(), "objectives": [Objective("bw", ("allreduce",), (None,)).to_json()], "grids": ["1x2"]})
    return study


def test_loop_never_evaluates_forbidden_and_aborts_past_failure_rate():
    s = space()
    seen = []

    def evaluate_(number, setup):
        env = setup.assignments()
        seen.append((env["NCCL_ALGO"], env["NCCL_PROTO"]))
        return EvalOutcome([1.0 + len(seen)])

    study = new_study(s)
    stats = run_search(study, s, [None], evaluate_, settings(trials=30))
    assert ("Tree", "LL128") not in seen and len(set(seen)) == len(seen) == 5
    assert "every allowed combination" in stats.stop_reason
    pruned = study.get_trials(states=(TrialState.PRUNED,))
    assert all(t.user_attrs["forbidden"] and t.params == {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL128"} for t in pruned)

    def failing(number, setup):
        return EvalOutcome(None, "init_error", "NCCL WARN boom")

    study = new_study(s)
    with pytest.raises(SearchAborted, match="max_failure_rate"):
        run_search(study, s, [None], failing, settings())
    fails = study.get_trials(states=(TrialState.FAIL,))
    assert len(fails) == 3 and all(t.user_attrs["failure_class"] == "init_error" and t.user_attrs["root_cause"] == "NCCL WARN boom" for t in fails)


def test_a_trial_asked_after_another_worker_filled_the_budget_launches_nothing(monkeypatch):
    """Workers count, then ask: a peer whose trial lands between this worker's count and its ask fills the budget,
    and this worker's trial is surplus (PRUNED before sampling) instead of an eleventh of ten."""
    import envmatrix.search.study as study_mod

    s, real_ask, asked = space(), study_mod.ask_owned, []
    study = new_study(s)
    peer = {"worker_host": "peer", "worker_pid": 1, "worker_started": "1", "heartbeat": time.time()}

    def ask_after_a_peer(study_, owner):
        asked.append(owner)
        if len(asked) == 4:  # this worker counted 3 of 4; the peer asks first, and tells its trial 0.5 s later
            peer_trial = real_ask(study_, peer)
            threading.Timer(0.5, study_.tell, (peer_trial, 2.0)).start()
        return real_ask(study_, owner)

    monkeypatch.setattr(study_mod, "ask_owned", ask_after_a_peer)
    # the budget is full with the peer's trial running: this worker waits for it (it could die and leave a retry)
    stats = run_search(study, s, [None], lambda n, setup: EvalOutcome([1.0]),
                       settings(trials=4, heartbeat_interval_s=0.1))
    assert stats.told == 3 and "holds 4 trials" in stats.stop_reason, stats
    (surplus,) = study.get_trials(states=(TrialState.PRUNED,))
    assert surplus.user_attrs["surplus"] and not surplus.params and surplus.number == 4
    (peers,) = [t for t in study.get_trials() if t.user_attrs["worker_host"] == "peer"]
    assert peers.state == TrialState.COMPLETE and not study.get_trials(states=(TrialState.RUNNING,))


def test_recover_stale_fails_and_reenqueues_once():
    s = space()
    study = new_study(s)
    params = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}
    dead = study.ask({k: optuna.distributions.CategoricalDistribution(list(s.choices(k))) for k in params})
    for k, v in {"worker_host": "here", "worker_pid": 999999999, "heartbeat": time.time()}.items():
        dead.set_user_attr(k, v)
    alive = study.ask()
    for k, v in {"worker_host": "elsewhere", "worker_pid": 1, "heartbeat": time.time()}.items():
        alive.set_user_attr(k, v)
    old = study.ask()
    for k, v in {"worker_host": "elsewhere", "worker_pid": 1, "heartbeat": time.time() - 1000}.items():
        old.set_user_attr(k, v)
    assert sorted(recover_stale(study, grace_s=60, here="here")) == [dead.number, old.number]
    assert recover_stale(study, grace_s=60, here="here") == []
    by = {t.number: t for t in study.get_trials()}
    assert by[dead.number].state == TrialState.FAIL and by[dead.number].user_attrs["failure_class"] == WORKER_LOST
    assert by[alive.number].state == TrialState.RUNNING
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert len(waiting) == 1 and waiting[0].user_attrs["retry_of"] == dead.number


def test_tuner_rows_pick_fastest_per_size():
    s = space()
    study = new_study(s)
    table = {("Ring", "LL"): {"1024": 50.0, "1048576": 10.0}, ("Ring", "Simple"): {"1024": 20.0, "1048576": 90.0},
             ("Tree", "LL"): {"1024": 30.0, "1048576": 5.0}}
    for (algo, proto), bw in table.items():
        study.enqueue_trial({"NCCL_ALGO": algo, "NCCL_PROTO": proto})
        t = study.ask()
        s.suggest(t)
        t.set_user_attr("metrics", {"1x2": {"allreduce": bw}})
        study.tell(t, bw["1048576"])
    assert tuner_rows(study) == [["allreduce", "0", "1024", "ring", "ll", "-1", "1", "2", "-1", "-1"],
                                 ["allreduce", "1025", "1048576", "ring", "simple", "-1", "1", "2", "-1", "-1"]]


@pytest.mark.parametrize("value, function, expected", [
    ("Ring", "allreduce", "ring"),
    ("allreduce:tree", "allreduce", "tree"),
    ("allreduce:tree", "allgather", None),                    # not forced for allgather: NCCL decides
    ("ring;allreduce:tree", "allgather", "ring"),
    ("allreduce:tree;broadcast:ring", "broadcast", "ring"),
    ("allreduce:tree,ring", "allreduce", None),               # two allowed: not a single tuner choice
    ("^tree", "allreduce", None),
    (None, "allreduce", None),
])
def test_tuner_reads_nccl_per_function_algorithm(value, function, expected):
    assert _single(value, TUNER_ALGOS, function) == expected


def test_trial_lines_say_unset_as_the_tables_do():
    """The per-trial console line names a variable left to NCCL ``unset`` (the report's tables do), not ``None``."""
    from rich.console import Console

    from envmatrix.cli.search import TrialLines

    study = optuna.create_study(direction="maximize")
    trial = study.ask({"NCCL_ALGO": optuna.distributions.CategoricalDistribution([None, "Ring"]),
                       "NCCL_PROTO": optuna.distributions.CategoricalDistribution([None, "LL"])})
    trial = study._storage.get_trial(trial._trial_id)
    console = Console(record=True, width=200)
    nulls = {k: None for k in trial.params}
    frozen = optuna.trial.FrozenTrial(number=3, state=TrialState.COMPLETE, value=1.0, datetime_start=None,
                                      datetime_complete=None, params=nulls, distributions=trial.distributions,
                                      user_attrs={}, system_attrs={}, intermediate_values={}, trial_id=0)
    TrialLines(console)("result", frozen, EvalOutcome([12.5]))
    assert console.export_text().strip() == "trial 3: NCCL_ALGO=unset NCCL_PROTO=unset -> 12.5"


@pytest.mark.parametrize("name", ["bruteforce", "tpe", "random", "structured"])
def test_a_sampler_chosen_by_name_prints_no_optuna_experimental_warning(name):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from envmatrix.search.study import make_sampler

        assert make_sampler(name, 0, 6, space()) is not None
