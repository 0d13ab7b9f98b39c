"""A fleet's shared study without processes: a trial and its owner in one transaction, claims that one worker wins,
and who confirms (search.ownership, search.fleet) on real SQLite storages, several connections at once."""

import os
import re
import socket
import threading
import time

import optuna
import pytest
import sqlalchemy
from optuna.trial import TrialState

from envmatrix.search import fleet
from envmatrix.search.ownership import _take_waiting_rdb, ask_owned, insert_study_attr, rdb_backend, replace_study_attr
from envmatrix.search.study import Worker, make_storage, recover_stale
from test_search_postgres import postgres_url  # noqa: F401 - the fixture: a PostgreSQL server of this test's own

optuna.logging.set_verbosity(optuna.logging.WARNING)
HOST = socket.gethostname()
OWNER = {"worker_host": HOST, "worker_pid": os.getpid(), "worker_started": "1", "heartbeat": 1.0}
DEAD = Worker(HOST, 999_999_999, None)


def shared(tmp_path, workers=2):
    """The same SQLite study opened by ``workers`` storages (each its own engine and connections, as processes)."""
    url = f"sqlite:///{tmp_path / 'study.sqlite'}"
    optuna.create_study(storage=make_storage(url), study_name="s", direction="maximize")
    return [optuna.load_study(study_name="s", storage=make_storage(url)) for _ in range(workers)]


class Transactions:
    """The transactions a storage's engine commits that write, each as the tables it wrote."""

    def __init__(self, engine):
        self.done, self._open = [], []
        sqlalchemy.event.listen(engine, "before_cursor_execute", self._statement)
        sqlalchemy.event.listen(engine, "commit", self._commit)

    def _statement(self, conn, cursor, statement, *rest):
        wrote = re.match(r"\s*(?:INSERT INTO|UPDATE|DELETE FROM)\s+(\w+)", statement, re.IGNORECASE)
        if wrote:
            self._open.append(wrote.group(1))

    def _commit(self, conn):
        if self._open:
            self.done.append(self._open)
        self._open = []


@pytest.mark.parametrize("enqueued", [False, True], ids=["new_trial", "enqueued_trial"])
def test_ask_owned_writes_the_trial_and_its_owner_in_one_transaction(tmp_path, enqueued):
    (study,) = shared(tmp_path, 1)
    choices = optuna.distributions.CategoricalDistribution(["Ring", "Tree"])
    if enqueued:
        study.enqueue_trial({"NCCL_ALGO": "Tree"})
    seen = Transactions(rdb_backend(study).engine)
    trial = ask_owned(study, OWNER)
    assert len(seen.done) == 1, seen.done  # the RUNNING state and the owner rows: one commit
    assert {"trials", "trial_user_attributes"} <= set(seen.done[0]), seen.done
    fresh = optuna.load_study(study_name="s", storage=make_storage(f"sqlite:///{tmp_path / 'study.sqlite'}"))
    (running,) = fresh.get_trials(states=(TrialState.RUNNING,))
    assert running.number == trial.number == 0 and running.user_attrs == OWNER
    assert trial.suggest_categorical("NCCL_ALGO", choices.choices) == ("Tree" if enqueued else trial.params["NCCL_ALGO"])
    assert not fresh.get_trials(states=(TrialState.WAITING,))


def test_of_two_workers_exactly_one_takes_an_enqueued_trial(tmp_path):
    for round_ in range(3):
        (tmp_path / str(round_)).mkdir()
        a, b = shared(tmp_path / str(round_), 2)
        a.enqueue_trial({"x": 1})
        (waiting,) = a.get_trials(states=(TrialState.WAITING,))
        gate, won = threading.Barrier(2), {}

        def take(name, study):
            gate.wait()
            won[name] = _take_waiting_rdb(rdb_backend(study), waiting._trial_id, {**OWNER, "worker_pid": name})

        threads = [threading.Thread(target=take, args=(n, s)) for n, s in ((1, a), (2, b))]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert sorted(won.values()) == [False, True], won
        (taken,) = a.get_trials(states=(TrialState.RUNNING,))
        assert taken.user_attrs["worker_pid"] == next(n for n, w in won.items() if w)


def test_a_claim_is_inserted_once_and_replaced_only_by_the_reader_of_its_id(tmp_path):
    a, b = shared(tmp_path, 2)
    gate, won = threading.Barrier(2), {}

    def insert(name, study):
        gate.wait()
        won[name] = insert_study_attr(study, "k", {"id": name})

    threads = [threading.Thread(target=insert, args=(n, s)) for n, s in (("a", a), ("b", b))]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(won.values()) == [False, True]
    holder = fleet.study_system_attr(a, "k")["id"]
    assert not replace_study_attr(b, "k", "nobody", {"id": "c"})
    assert replace_study_attr(b, "k", holder, {"id": "c"})
    assert not replace_study_attr(a, "k", holder, {"id": "d"})  # read before b replaced it: too late
    assert fleet.study_system_attr(a, "k") == {"id": "c"}


def test_job_role_claim_defer_done_and_take_over():
    me, now = HOST, 1000.0
    claim = {"id": "c1", "worker_host": "other", "worker_pid": 7, "worker_started": "5", "at": now - 10}
    role = lambda **kw: fleet.job_role(**{"held": claim, "beat": None, "result": None, "finished": 9,  # noqa: E731
                                              "here": me, "now": now, "grace_s": 60, **kw}).kind
    assert role(held=None) == fleet.CLAIM
    assert role() == fleet.DEFER  # claimed 10 s ago on another host: alive
    assert role(now=now + 100) == fleet.TAKE_OVER  # silent past the grace
    assert role(now=now + 100, beat={"claim": "c1", "t": now + 90}) == fleet.DEFER  # its heartbeat is fresh
    assert role(now=now + 100, beat={"claim": "c0", "t": now + 90}) == fleet.TAKE_OVER  # an older claim's beat
    assert role(beat={"claim": "c1", "t": now, "released": "it was interrupted (Ctrl-C)"}) == fleet.TAKE_OVER
    assert role(beat={"claim": "c0", "t": now, "released": "it was interrupted (Ctrl-C)"}) == fleet.DEFER  # not this claim
    assert role(held={**claim, "worker_host": me, "worker_pid": DEAD.pid}) == fleet.TAKE_OVER  # dead on this host
    assert role(result={"claim": "c1", "over": 9}) == fleet.DONE
    assert role(result={"claim": "c1", "over": 9}, finished=12) == fleet.TAKE_OVER  # trials added since
    assert role(result={"claim": "c0", "over": 9}) == fleet.DEFER  # the verdict of a claim taken over since


def test_one_worker_claims_the_confirmation_the_others_defer_then_see_it_done(tmp_path):
    from envmatrix.search.confirm import CONFIRM_ATTR

    a, b = shared(tmp_path, 2)
    me = Worker.me()
    other = Worker(HOST, os.getppid(), None)  # a live process on this host: not taken over
    first = fleet.claim(a, fleet.CONFIRM_JOB, me, grace_s=60)
    assert first.role.kind == fleet.CLAIM and first.mine and first.held["worker_pid"] == me.pid
    second = fleet.claim(b, fleet.CONFIRM_JOB, other, grace_s=60)
    assert second.role.kind == fleet.DEFER and f"worker {HOST}:{me.pid} has claimed it" in second.role.reason
    a.set_user_attr(CONFIRM_ATTR, {"claim": first.held["id"], "over": 0, "winner": 0})
    done = fleet.claim(b, fleet.CONFIRM_JOB, other, grace_s=60)
    assert done.role.kind == fleet.DONE and done.result["winner"] == 0
    a.tell(ask_owned(a, OWNER), 1.0)  # a trial finished after that verdict: it is stale, confirmed again
    again = fleet.claim(b, fleet.CONFIRM_JOB, other, grace_s=60)
    assert again.role.kind == fleet.TAKE_OVER and fleet.study_system_attr(a, fleet.claim_key(fleet.CONFIRM_JOB))["id"] == again.held["id"]


def test_a_dead_workers_claim_and_running_trial_are_taken_over(tmp_path):
    (study,) = shared(tmp_path, 1)
    assert insert_study_attr(study, fleet.claim_key(fleet.CONFIRM_JOB), {"id": "dead", **DEAD.attrs(), "at": time.time()})
    lost = ask_owned(study, {**DEAD.attrs(), "heartbeat": time.time()})
    assert recover_stale(study, grace_s=300, here=HOST) == [lost.number]  # gone at once, not after the grace
    taken = fleet.claim(study, fleet.CONFIRM_JOB, Worker.me(), grace_s=300)
    assert taken.role.kind == fleet.TAKE_OVER and "is gone" in taken.role.reason


def test_a_lost_enqueued_trial_keeps_its_params_for_the_retry(tmp_path):
    (study,) = shared(tmp_path, 1)
    study.enqueue_trial({"NCCL_ALGO": "Tree"})
    lost = ask_owned(study, {**DEAD.attrs(), "heartbeat": time.time()})  # killed before it suggested anything
    assert recover_stale(study, grace_s=300, here=HOST) == [lost.number]
    (retry,) = study.get_trials(states=(TrialState.WAITING,))
    assert retry.system_attrs["fixed_params"] == {"NCCL_ALGO": "Tree"} and retry.user_attrs["retry_of"] == lost.number



@pytest.fixture(params=["sqlite", "postgresql"])
def any_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'study.sqlite'}"
    return request.getfixturevalue("postgres_url")


@pytest.mark.slow
def test_of_three_workers_recovering_one_dead_trial_exactly_one_fails_it_and_re_enqueues_it(any_url):
    # workers at a full budget poll recover_stale together (search.study.run_search): one retry per lost trial.
    # Before search.ownership.fail_running, 4 of 5 runs of this test failed on SQLite (two workers each failed it)
    storages = [make_storage(any_url) for _ in range(3)]  # each its own engine and connections, as processes
    for round_ in range(20):
        optuna.create_study(storage=storages[0], study_name=f"s{round_}", direction="maximize")
        studies = [optuna.load_study(study_name=f"s{round_}", storage=storage) for storage in storages]
        studies[0].enqueue_trial({"NCCL_ALGO": "Tree"})
        lost = ask_owned(studies[0], {**DEAD.attrs(), "heartbeat": time.time()})
        gate, got = threading.Barrier(3), {}

        def recover(name, study):
            gate.wait()
            got[name] = recover_stale(study, grace_s=300, here=HOST)

        threads = [threading.Thread(target=recover, args=(n, s)) for n, s in enumerate(studies)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert sorted(got.values()) == [[], [], [lost.number]], (round_, got)
        (retry,) = studies[0].get_trials(states=(TrialState.WAITING,))
        assert retry.user_attrs["retry_of"] == lost.number
        failed = studies[1].trials[lost.number]
        assert failed.state == TrialState.FAIL and failed.user_attrs["failure_class"] == "worker_lost"
        assert "is gone" in failed.user_attrs["root_cause"] and failed.datetime_complete is not None


def test_a_trial_made_while_a_retry_waits_counts_the_retry(tmp_path, monkeypatch):
    """A retry takes its number when a peer re-enqueues it and counts once a worker takes it; a worker that found no
    waiting trial and then made a new one (numbered after the retry) must count the retry too, or that worker and the
    retry's taker both run one and the study holds trials + 1 (seen in test_search_fleet_kill's silent-worker test)."""
    import envmatrix.search.study as study_mod
    from envmatrix.catalog import load_catalog
    from envmatrix.search.objective import EvalOutcome
    from envmatrix.search.ownership import _running
    from envmatrix.search.space import parse_search_space
    from envmatrix.search.study import SearchSettings, is_surplus, run_search

    (study,) = shared(tmp_path, 1)
    space = parse_search_space({"space": {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": "all"}}, load_catalog(), {}, "t: search")
    real_ask, asked = study_mod.ask_owned, []

    def ask_as_a_peer_re_enqueues(study_, owner):
        asked.append(owner)
        if len(asked) != 3:
            return real_ask(study_, owner)
        # this worker found nothing waiting; a peer re-enqueues a lost trial's params before this worker's trial is made
        study_.enqueue_trial({"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}, user_attrs={"retry_of": 0})
        return optuna.trial.Trial(study_, study_._storage.create_new_trial(study_._study_id, template_trial=_running(owner)))

    monkeypatch.setattr(study_mod, "ask_owned", ask_as_a_peer_re_enqueues)
    settings = SearchSettings(trials=3, sampler="random", seed=0, storage=None, study_name="s", max_failure_rate=0.5,
                              heartbeat_interval_s=0.1, heartbeat_grace_s=60.0, top_k=5, baseline=False, max_forbidden_streak=50)
    run_search(study, space, [None], lambda n, setup: EvalOutcome([1.0]), settings, worker=Worker.me())
    ran = len(study.get_trials(states=(TrialState.COMPLETE,)))
    for _ in study.get_trials(states=(TrialState.WAITING,)):  # a peer takes what is left waiting
        taken = real_ask(study, {**OWNER, "worker_pid": 1})
        ran += not is_surplus(study, taken.number, settings.trials)
    assert ran == 3


def test_budget_window_role_joins_an_open_or_busy_window_and_opens_a_new_one_after_an_idle_close():
    held, now = {"id": "w1", "deadline": 1000.0}, 900.0
    assert fleet.window_role(None, 60, now, fleet_at_work=False) == (True, 960.0)
    assert fleet.window_role(held, 60, now, fleet_at_work=False) == (False, 1000.0)  # open: joined, its own budget unused
    assert fleet.window_role(held, 60, 1010.0, fleet_at_work=True) == (False, 1000.0)  # closed, peers finishing: no trials
    assert fleet.window_role(held, 60, 1010.0, fleet_at_work=False) == (True, 1070.0)  # closed and idle: a resumed study
    held = {**held, "budget_s": 60}
    assert fleet.window_role(held, 600, now, fleet_at_work=False) == (True, 1500.0)  # resumed, asking another budget
    assert fleet.window_role(held, 600, now, fleet_at_work=True) == (False, 1000.0)  # ... but its peers are at work


@pytest.mark.slow  # it waits out two 3 s windows
def test_a_later_worker_keeps_the_studys_budget_window_and_a_live_trial_keeps_a_closed_one(tmp_path):
    a, b = shared(tmp_path, 2)
    other = Worker(HOST, os.getppid(), None)  # a live process on this host
    first = fleet.budget_window(a, 3.0, Worker.me(), grace_s=60)
    time.sleep(0.2)
    assert fleet.budget_window(b, 3.0, other, grace_s=60) == first  # not 0.2 s later than its peer's
    running = ask_owned(a, {**Worker.me().attrs(), "heartbeat": time.time()})
    time.sleep(max(0.0, first - time.time()) + 0.05)
    assert fleet.budget_window(b, 3.0, other, grace_s=60) == first  # closed, but a live worker's trial still runs
    a.tell(running, 1.0)
    reopened = fleet.budget_window(b, 3.0, other, grace_s=60)
    assert reopened > first + 3.0 and fleet.study_system_attr(a, fleet.BUDGET_KEY)["worker_pid"] == other.pid
    dead = ask_owned(a, {**DEAD.attrs(), "heartbeat": time.time()})  # a dead worker's trial does not hold a window open
    time.sleep(max(0.0, reopened - time.time()) + 0.05)
    assert fleet.budget_window(a, 3.0, Worker.me(), grace_s=60) > reopened
    assert a.trials[dead.number].state == TrialState.RUNNING
