"""The study: storage, samplers, the ask/tell loop and stale-trial recovery.

Optuna is driven with ask/tell (hydra-optuna-sweeper is pinned to Optuna 2.x,
and Optuna's own heartbeat works only inside ``optimize()``). So the driver
keeps its own liveness record on every trial it runs, as user attributes:
``worker_host``, ``worker_pid``, ``worker_started`` (the pid's start time, so
a reused pid is not mistaken for the driver) and ``heartbeat`` (refreshed by a
thread while the probe runs), written in the transaction that makes the trial
RUNNING (search.ownership.ask_owned), so no kill leaves a RUNNING trial without
them. On start every worker fails the RUNNING trials
whose worker is gone (same host and that process is dead) or whose heartbeat is
older than ``heartbeat_grace_s``, and re-enqueues their params; the first
worker to fail a trial wins (search.ownership.fail_running: one conditional
UPDATE), so the params are re-enqueued once. A worker interrupted (Ctrl-C, SIGTERM)
while probing hands its trial back the same way before it exits.

A forbidden sample launches nothing: it is told PRUNED with ``forbidden=True``
and does not count against ``trials``; nor does a trial a worker asked for after
the budget filled (``surplus=True``, PRUNED before sampling). A sample equal to an earlier finished
trial reuses that trial's verdict (``cached_from``) instead of probing again. With ``search.screen`` a trial
may stop at the cheap fidelity (:func:`measure`): PRUNED with ``screened=True``, counted against ``trials``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from envmatrix import interrupts, values
from envmatrix.config.schema import SEARCH_DEFAULTS
from envmatrix.env.atoms import Setup
from envmatrix.errors import ConfigError, EnvmatrixError, did_you_mean
from envmatrix.paths import check_name
from envmatrix.registry import Registry
from envmatrix.search.objective import EvalOutcome, Objective
from envmatrix.search.ownership import ask_owned, fail_running
from envmatrix.search.screen import (SCREEN_ATTR, SCREENED, CostCheck, Tally, best_cheap, estimate, goes_on, still_pays,
                                     tally)
from envmatrix.search.space import SearchSpace

log = logging.getLogger(__name__)

STUDY_ATTR = "envmatrix"  # study user attribute: space, objectives, grids, backend, probe
BASELINE_ATTR = "baseline"
# study user attribute: why the last worker to finish its trials stopped them short (search.max_failure_rate), so
# confirmation never ran; None once a worker's trials end as planned
STOPPED_ATTR = "stopped"
WORKER_LOST = "worker_lost"


class SearchAborted(EnvmatrixError):
    """Too many failed trials (past ``search.max_failure_rate``)."""

    exit_code = 1


@dataclass(frozen=True)
class SearchSettings:
    trials: int
    sampler: str
    seed: int
    storage: Optional[str]
    study_name: str
    max_failure_rate: float
    heartbeat_interval_s: float
    heartbeat_grace_s: float
    top_k: int
    baseline: bool
    max_forbidden_streak: int
    confirm_top_k: int = 3
    confirm_repeats: int = 3
    confirm_max_repeats: int = 6
    allow_shared_gpu_figures: bool = False  # objectives may read the busbw of ranks that shared a GPU
    budget_s: Optional[float] = None  # wall clock for the study's trials (search.fleet.budget_window)
    screen: Any = None  # search.screen.Screen (cheap fidelity first); None: every trial at the full fidelity


def parse_settings(search: Mapping[str, Any], where: str, default_name: str, default_seed: int) -> SearchSettings:
    unknown = [str(k) for k in search if k not in SEARCH_DEFAULTS]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], SEARCH_DEFAULTS)}; allowed: {', '.join(SEARCH_DEFAULTS)}")
    s = {**SEARCH_DEFAULTS, **{k: v for k, v in search.items() if v is not None}}

    def integer(key: str, low: int) -> int:
        return values.integer(f"{where}.{key}", s[key], low)

    def positive(key: str) -> float:
        return values.number(f"{where}.{key}", s[key], above=0)

    sampler = str(s["sampler"]).lower()
    _SAMPLERS.get(sampler, f"{where}.sampler")  # refuse an unknown sampler while parsing the config
    rate = values.number(f"{where}.max_failure_rate", s["max_failure_rate"], minimum=0, maximum=1)
    for key in ("allow_shared_gpu_figures", "baseline"):
        if not isinstance(s[key], bool):
            raise ConfigError(f"{where}.{key}: {s[key]!r} not allowed; allowed: true, false")
    repeats = integer("confirm_repeats", 1)
    if search.get("confirm_max_repeats") is not None and integer("confirm_max_repeats", 1) < repeats:
        raise ConfigError(f"{where}.confirm_max_repeats: {s['confirm_max_repeats']!r} is below confirm_repeats ({repeats}); "
                          f"allowed: an integer >= confirm_repeats, or leave it out")
    interval, grace = positive("heartbeat_interval_s"), positive("heartbeat_grace_s")
    if grace <= 2 * interval:  # a live worker would read as dead between two beats, and peers would re-run its trial
        raise ConfigError(f"{where}.heartbeat_grace_s: {s['heartbeat_grace_s']!r} is not more than twice "
                          f"heartbeat_interval_s ({s['heartbeat_interval_s']!r}); allowed: a number > {2 * interval:g}")
    # text or nothing: a YAML true, 5 or list was turned into the storage URL '5' (the study's name: check_name)
    if s["storage"] is not None and not isinstance(s["storage"], str):
        raise ConfigError(f"{where}.storage: {s['storage']!r} not allowed; allowed: an Optuna storage URL "
                          "(sqlite:///study.db, postgresql://host/db), or null for the run directory's study.sqlite")
    if s["storage"] is not None and not str(s["storage"]).strip():
        raise ConfigError(f"{where}.storage: {s['storage']!r} is empty; allowed: an Optuna storage URL (sqlite:///study.db, "
                          "postgresql://host/db), or null for the run directory's study.sqlite")
    return SearchSettings(
        trials=integer("trials", 1),
        sampler=sampler,
        seed=default_seed if s["seed"] is None else values.seed(f"{where}.seed", s["seed"]),
        storage=None if s["storage"] is None else str(s["storage"]),
        study_name=check_name(default_name if s["study_name"] is None else s["study_name"], f"{where}.study_name"),
        max_failure_rate=rate,
        heartbeat_interval_s=interval,
        heartbeat_grace_s=grace,
        top_k=integer("top_k", 1),
        baseline=bool(s["baseline"]),
        max_forbidden_streak=integer("max_forbidden_streak", 1),
        confirm_top_k=integer("confirm_top_k", 0),
        confirm_repeats=repeats,
        confirm_max_repeats=max(integer("confirm_max_repeats", 1), repeats),
        allow_shared_gpu_figures=s["allow_shared_gpu_figures"],
        budget_s=None if s["budget_s"] is None else positive("budget_s"),
    )


# ---------------------------------------------------------------- optuna objects


def make_sampler(name: str, seed: int, space_size: int = 100, space: Optional[SearchSpace] = None) -> Any:
    """A seeded sampler. ``gp`` needs torch and scipy in the driver (Optuna's GPSampler);
    ``structured`` (envmatrix.search.structured) needs the space it plans over."""
    import warnings

    import optuna

    factory = _SAMPLERS.get(name, "search.sampler")
    with warnings.catch_warnings():
        # the user picked the sampler by name: Optuna's notice that its interface may change is not theirs to act on
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return factory(seed, space_size, space)


def _structured(seed: int, space_size: int, space: Optional[SearchSpace]) -> Any:
    if space is None:
        raise ValueError("make_sampler('structured') needs the SearchSpace")
    from envmatrix.search.scale import SCALE_FROM

    if space.size >= SCALE_FROM:  # tens of thousands of configs: explore, then climb from several basins
        return _scale(seed, space_size, space)
    from envmatrix.search.structured import make_structured_sampler

    return make_structured_sampler(space.space.values, space.vars, space.is_forbidden, seed)


def _scale(seed: int, space_size: int, space: Optional[SearchSpace]) -> Any:
    if space is None:
        raise ValueError("make_sampler('scale') needs the SearchSpace")
    from envmatrix.search.scale import make_scale_sampler

    return make_scale_sampler(space.space.values, space.vars, space.is_forbidden, seed)


def _tpe(seed: int, space_size: int, space: Optional[SearchSpace]) -> Any:
    """TPE starts with ``max(3, min(10, space_size // 10))`` random trials, so a
    small space is not spent mostly on the random start."""
    import optuna

    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(3, min(10, space_size // 10)), multivariate=True)


def _gp(seed: int, space_size: int, space: Optional[SearchSpace]) -> Any:
    import optuna

    return optuna.samplers.GPSampler(seed=seed)


def _random(seed: int, space_size: int, space: Optional[SearchSpace]) -> Any:
    import optuna

    return optuna.samplers.RandomSampler(seed=seed)


def _ask_tell_brute_force(seed: int) -> Any:
    """BruteForceSampler calls ``study.stop()`` once the space is exhausted, which raises outside
    ``optimize()``; the ask/tell loop sees exhaustion by itself, so that stop is dropped."""
    import optuna

    class AskTellBruteForceSampler(optuna.samplers.BruteForceSampler):
        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            try:
                super().after_trial(study, trial, state, values)
            except RuntimeError as exc:
                if "Study.stop" not in str(exc):
                    raise

    return AskTellBruteForceSampler(seed=seed)


_SAMPLERS: Registry[Callable[[int, int, Optional[SearchSpace]], Any]] = Registry("sampler")
for _name, _factory in (("structured", _structured), ("scale", _scale), ("tpe", _tpe), ("gp", _gp), ("random", _random),
                        ("bruteforce", lambda seed, space_size, space: _ask_tell_brute_force(seed))):
    _SAMPLERS.add(_name, _factory)
SAMPLERS = _SAMPLERS.names()


def make_storage(url: str, create: bool = True) -> Any:
    """An SQLite file holding other tables is refused before Optuna adds its own; ``create=False`` (export and
    report, which read) refuses an empty one too."""
    import optuna

    from envmatrix.store.sqlite import sqlite_tables

    tables = sqlite_tables(url[len("sqlite:///"):]) if url.startswith("sqlite:///") else None
    if tables and "studies" not in tables:  # someone else's database: Optuna's tables are not added to it
        raise ConfigError(f"search.storage: {redact(url)} is an SQLite database without Optuna's tables (it holds "
                          f"{', '.join(sorted(tables)[:5])}); allowed: a study database of envmatrix search, or a new file")
    # an empty file or database would get Optuna's tables; bytes that are no SQLite make Optuna fail before writing
    empty = url.startswith("sqlite:///") and (tables == frozenset() or os.path.isfile(url[len("sqlite:///"):])
                                               and os.path.getsize(url[len("sqlite:///"):]) == 0)
    if not create and empty:
        raise ConfigError(f"search.storage: {redact(url)} holds no Optuna study; allowed: the study.sqlite of an "
                          "envmatrix search")
    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    for attempt in range(6):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        except ImportError as exc:
            raise ConfigError(f"search.storage: {redact(url)} needs a database driver that is not installed ({exc}); "
                              "pip install 'envmatrix[search]' (psycopg2-binary for postgresql://)") from None
        except Exception as exc:  # sqlalchemy ArgumentError / OperationalError / IntegrityError
            # Workers starting together on an empty database race to create Optuna's tables: retry.
            # (PostgreSQL says "duplicate key" / "already exists", SQLite "UNIQUE constraint failed")
            if any(race in str(exc) for race in ("duplicate key", "already exists", "UNIQUE constraint failed")):
                if attempt < 5:
                    time.sleep(0.5 * (attempt + 1))
                    continue
            raise ConfigError(f"search.storage: cannot open {redact(url)}: {str(exc).splitlines()[0]}") from None
    raise AssertionError("unreachable")


def redact(url: str) -> str:
    """The storage URL without its password (for messages and the dashboard line)."""
    if "://" in url and "@" in url.split("://", 1)[1].split("/", 1)[0]:
        scheme, rest = url.split("://", 1)
        cred, host = rest.split("@", 1)
        user = cred.split(":", 1)[0]
        return f"{scheme}://{user}{':***' if ':' in cred else ''}@{host}"
    return url


def open_study(storage: Any, name: str, directions: Sequence[str], sampler: Any, meta: Mapping[str, Any]) -> Any:
    """Create or load ``name``; a study created for another space/objective is refused."""
    import optuna

    study = optuna.create_study(storage=storage, study_name=name, directions=list(directions), sampler=sampler, load_if_exists=True)
    have = [d.name.lower() for d in study.directions]
    if have != list(directions):
        raise ConfigError(f"search.study_name: study {name!r} optimizes {have}, this config {list(directions)}; "
                          "pick another study_name or the same objectives")
    stored = study.user_attrs.get(STUDY_ATTR)
    if stored is None:
        study.set_user_attr(STUDY_ATTR, dict(meta))
    else:
        for key in ("space", "objectives"):
            if stored.get(key) != meta.get(key):
                raise ConfigError(f"search.study_name: study {name!r} was created with a different {key}; "
                                  "resume it with the same config or pick another study_name")
        # trials measured on other grids, another backend or another probe (bench sizes, iterations: what a trial's
        # value is read from) would be ranked against these, and the winner confirmed on this config's while the
        # report and export name the study's
        for key in ("grids", "backend", "probe"):
            if key in stored and stored[key] != meta.get(key):
                path, was, given = first_difference(key, stored[key], meta.get(key))
                raise ConfigError(f"{path}: {given!r} given, but study {name!r} was created with {path} "
                                  f"{was!r}; allowed: {was!r} to resume it, or another search.study_name")
    return study


def first_difference(path: str, was: Any, given: Any) -> tuple[str, Any, Any]:
    """(key path, stored value, given value) of the first place two study metadata values differ, the path as the
    config spells it (a probe's params are its own keys: probe.bench.iters)."""
    if isinstance(was, Mapping) and isinstance(given, Mapping):
        for key in sorted(set(was) | set(given)):
            if was.get(key) != given.get(key):
                inner = path if (path, key) == ("probe", "params") else f"{path}.{key}"
                return first_difference(inner, was.get(key), given.get(key))
    return path, was, given


# ---------------------------------------------------------------- worker liveness


def process_start_time(pid: int) -> Optional[str]:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks), None if the pid is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@dataclass(frozen=True)
class Worker:
    host: str
    pid: int
    started: Optional[str]

    @classmethod
    def me(cls) -> "Worker":
        pid = os.getpid()
        return cls(socket.gethostname(), pid, process_start_time(pid))

    def attrs(self) -> dict[str, Any]:
        return {"worker_host": self.host, "worker_pid": self.pid, "worker_started": self.started}


def _worker_gone(attrs: Mapping[str, Any], here: str) -> bool:
    if attrs.get("worker_host") != here or attrs.get("worker_pid") is None:
        return False
    started = process_start_time(int(attrs["worker_pid"]))
    return started is None or (attrs.get("worker_started") is not None and started != attrs["worker_started"])


def stale_reason(attrs: Mapping[str, Any], here: str, now: float, grace_s: float, trial_start: Optional[float]) -> Optional[str]:
    """Why a RUNNING trial is stale, or None while its worker may still be at work."""
    if _worker_gone(attrs, here):
        return f"worker {attrs.get('worker_host')}:{attrs.get('worker_pid')} is gone"
    beat = attrs.get("heartbeat", trial_start)
    if beat is not None and now - float(beat) > grace_s:
        return f"no heartbeat for {now - float(beat):.0f}s (grace {grace_s:.0f}s)"
    return None


def running_trials(study: Any, grace_s: float, here: Optional[str] = None,
                   now: Optional[float] = None) -> list[tuple[Any, Optional[str]]]:
    """The RUNNING trials, each with why it is stale (:func:`stale_reason`), None while its worker may be at work."""
    from optuna.trial import TrialState

    here = here or socket.gethostname()
    now = time.time() if now is None else now
    return [(t, stale_reason(t.user_attrs, here, now, grace_s, t.datetime_start.timestamp() if t.datetime_start else None))
            for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))]


def recover_stale(study: Any, grace_s: float, here: Optional[str] = None, now: Optional[float] = None) -> list[int]:
    """Fail the stale RUNNING trials and re-enqueue their params; returns the recovered trial numbers."""
    recovered = []
    for t, reason in running_trials(study, grace_s, here, now):
        if reason is None:
            continue
        if hand_back(study, t, reason):
            log.warning("trial %d: %s; failed it and re-enqueued its params", t.number, reason)
            recovered.append(t.number)
    return recovered


def hand_back(study: Any, t: Any, reason: str) -> bool:
    """Fail the RUNNING trial ``t`` (a FrozenTrial) as ``worker_lost`` and re-enqueue its params for another worker;
    False when another worker got there first."""
    if not fail_running(study, t._trial_id, {"failure_class": WORKER_LOST, "root_cause": reason}):
        return False
    # a worker killed after taking an enqueued trial but before suggesting left its params in fixed_params only
    params = dict(t.params) or dict(t.system_attrs.get("fixed_params") or {})
    if params:
        study.enqueue_trial(params, user_attrs={"retry_of": t.number}, skip_if_exists=False)
    return True


class Heartbeat:
    """Calls ``beat`` every ``interval_s`` until stopped: the liveness record of a trial or of a claim."""

    def __init__(self, beat: Callable[[], None], interval_s: float) -> None:
        self.beat, self.interval_s = beat, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="envmatrix-heartbeat", daemon=True)

    @classmethod
    def of_trial(cls, study: Any, trial_id: int, interval_s: float) -> "Heartbeat":
        """Refreshes the ``heartbeat`` user attribute of one trial."""
        storage = study._storage
        return cls(lambda: storage.set_trial_user_attr(trial_id, "heartbeat", time.time()), interval_s)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
            except Exception as exc:  # a finished trial or a flaky DB: the next beat tries again
                log.debug("heartbeat: %s", exc)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# ---------------------------------------------------------------- the loop

Evaluator = Callable[[int, Setup], EvalOutcome]
Listener = Callable[[str, Any, Optional[EvalOutcome]], None]


def counts_toward_budget(t: Any) -> bool:
    """Finished, in-flight or queued trials that are neither forbidden samples nor lost-worker casualties. Queued
    (WAITING, e.g. a lost trial's retry) counts: its number was given when it was enqueued, so a trial made after
    that and judged by :func:`is_surplus` before a worker takes the retry must count it. A trial stopped at the cheap
    fidelity (search.screen) counts: it was a configuration looked at."""
    from optuna.trial import TrialState

    if t.state == TrialState.PRUNED:
        return bool(t.user_attrs.get(SCREENED))
    if t.state not in (TrialState.COMPLETE, TrialState.FAIL, TrialState.RUNNING, TrialState.WAITING):
        return False
    return not t.user_attrs.get("forbidden") and t.user_attrs.get("failure_class") != WORKER_LOST


def is_surplus(study: Any, number: int, trials: int) -> bool:
    """Whether trial ``number`` came over the budget: ``trials`` trials that count were asked before it. Workers
    count, then ask; two that counted one short of the budget both ask, and the later-numbered trial (the storage
    numbers them in one order for every worker) launches nothing."""
    earlier = [t for t in study.get_trials(deepcopy=False) if t.number < number and counts_toward_budget(t)]
    return len(earlier) >= trials


def _verdicts(study: Any, space: SearchSpace) -> dict[tuple, Any]:
    """Row -> an earlier finished (or screened) trial with those params (the first one)."""
    from optuna.trial import TrialState

    out: dict[tuple, Any] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)):
        if not counts_toward_budget(t):
            continue
        row = space.row_of(t.params)
        if row is not None:
            out.setdefault(row, t)
    return out


@dataclass
class LoopStats:
    told: int = 0
    probed: int = 0
    failed: int = 0
    forbidden: int = 0
    cached: int = 0
    screened: int = 0  # stopped at search.screen's cheap fidelity
    recovered: list[int] = field(default_factory=list)
    stop_reason: str = ""


def failure_rate(study: Any) -> tuple[int, int]:
    from optuna.trial import TrialState

    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)) if counts_toward_budget(t)]
    return sum(t.state == TrialState.FAIL for t in done), len(done)


def run_search(
    study: Any,
    space: SearchSpace,
    objectives: Sequence[Objective],
    evaluate: Evaluator,
    settings: SearchSettings,
    worker: Optional[Worker] = None,
    listener: Optional[Listener] = None,
    min_for_abort: int = 3,
    deadline: Optional[float] = None,
) -> LoopStats:
    """:func:`ask_and_tell`; interrupted (Ctrl-C, SIGTERM) anywhere between an ask and its tell, not only in the probe,
    this worker hands its trial back before it exits: a peer on another host would wait heartbeat_grace_s for it."""
    worker = worker or Worker.me()
    try:
        return ask_and_tell(study, space, objectives, evaluate, settings, worker, listener, min_for_abort, deadline)
    except KeyboardInterrupt:
        from optuna.trial import TrialState

        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if (t.user_attrs.get("worker_host"), t.user_attrs.get("worker_pid")) == (worker.host, worker.pid):
                hand_back(study, t, f"worker {worker.host}:{worker.pid} was interrupted ({interrupts.described()})")
        raise


def ask_and_tell(
    study: Any,
    space: SearchSpace,
    objectives: Sequence[Objective],
    evaluate: Evaluator,
    settings: SearchSettings,
    worker: Worker,
    listener: Optional[Listener] = None,
    min_for_abort: int = 3,
    deadline: Optional[float] = None,
) -> LoopStats:
    """Ask/tell until the study holds ``settings.trials`` trials (none of them still running on a peer, whose
    worker may yet die and leave it to be re-run), ``settings.budget_s`` is spent (checked before
    each ask: a trial under way finishes; ``deadline``: the study's window as time.time(), search.fleet.budget_window;
    None: budget_s from now), the space is exhausted, or failures pass the limit."""
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    notify = listener or (lambda *_: None)
    stats = LoopStats(recovered=recover_stale(study, settings.heartbeat_grace_s, worker.host))
    allowed = len(space.allowed_rows())
    streak = 0
    if settings.budget_s is not None and deadline is None:
        deadline = time.time() + settings.budget_s
    while True:
        if deadline is not None and time.time() >= deadline:
            stats.stop_reason = (f"the study's search.budget_s window closed at {time.strftime('%H:%M:%S', time.localtime(deadline))} "
                                 f"after {stats.told} trials of this worker")
            break
        trials = study.get_trials(deepcopy=False)
        in_budget = [t for t in trials if counts_toward_budget(t)]
        if len(in_budget) >= settings.trials and not any(t.state == TrialState.WAITING for t in in_budget):
            if not any(t.state == TrialState.RUNNING for t in in_budget):
                stats.stop_reason = f"the study holds {len(in_budget)} trials (trials={settings.trials})"
                break
            # A peer's trial fills the budget only if its worker lives to tell it: wait, failing the stale ones
            # (their params are re-enqueued, and this worker runs them), or the study ends short of ``trials``.
            lost = recover_stale(study, settings.heartbeat_grace_s, worker.host)
            stats.recovered += lost
            if not lost:
                time.sleep(min(1.0, settings.heartbeat_interval_s))
            continue
        waiting = any(t.state == TrialState.WAITING for t in trials)
        if not waiting and len(_verdicts(study, space)) >= allowed:
            stats.stop_reason = f"every allowed combination ({allowed}) has been tried"
            break
        trial = ask_owned(study, {**worker.attrs(), "heartbeat": time.time()})
        if is_surplus(study, trial.number, settings.trials):
            trial.set_user_attr("surplus", True)
            study.tell(trial, state=TrialState.PRUNED)
            continue
        row = space.suggest(trial)
        setup = space.setup(row)
        trial.set_user_attr("setup", setup.name)
        if space.is_forbidden(row):
            trial.set_user_attr("forbidden", True)
            study.tell(trial, state=TrialState.PRUNED)
            stats.forbidden += 1
            streak += 1
            notify("forbidden", trial, None)
            if streak >= settings.max_forbidden_streak:
                stats.stop_reason = f"{streak} forbidden samples in a row; the sampler keeps proposing forbidden combinations"
                break
            continue
        streak = 0
        earlier = _verdicts(study, space).get(row)
        if earlier is not None and earlier.number != trial.number:
            outcome = EvalOutcome(
                values=list(earlier.values) if earlier.state == TrialState.COMPLETE else None,
                failure_class=earlier.user_attrs.get("failure_class"),
                root_cause=earlier.user_attrs.get("root_cause"),
                attrs={k: earlier.user_attrs[k] for k in ("metrics", "per_grid", SCREEN_ATTR, SCREENED)
                       if k in earlier.user_attrs},
                screened=earlier.state == TrialState.PRUNED,
            )
            outcome.attrs["cached_from"] = earlier.number
            stats.cached += 1
        else:
            notify("trial", trial, None)
            with Heartbeat.of_trial(study, trial._trial_id, settings.heartbeat_interval_s):
                # interrupted: run_search hands the trial back
                outcome = measure(study, evaluate, trial.number, setup, settings, objectives)
            stats.probed += 1
        try:
            for key, value in outcome.attrs.items():
                trial.set_user_attr(key, value)
            if outcome.screened:  # the samplers read the estimate (search.structured), TPE the reported value
                trial.report(outcome.attrs[SCREEN_ATTR]["estimate"], 0)
                study.tell(trial, state=TrialState.PRUNED)
            elif outcome.failed:
                trial.set_user_attr("failure_class", outcome.failure_class or "unknown")
                trial.set_user_attr("root_cause", outcome.root_cause or "")
                study.tell(trial, state=TrialState.FAIL)
            else:
                study.tell(trial, outcome.values)
        except (UpdateFinishedTrialError, ValueError):  # Optuna's refusals to write a finished trial
            if study._storage.get_trial(trial._trial_id).state == TrialState.RUNNING:
                raise
            # this worker went silent past heartbeat_grace_s (a stalled host) and a peer failed the trial and
            # re-enqueued its params: that retry is the trial now, this late result is dropped
            log.warning("trial %d was failed by another worker while this one probed (%s); its result is dropped, "
                        "the retry stands", trial.number, study._storage.get_trial(trial._trial_id).user_attrs.get("root_cause"))
            continue
        stats.failed += outcome.failed
        stats.screened += outcome.screened
        stats.told += 1
        notify("result", trial, outcome)
        failed, done = failure_rate(study)
        if done >= min_for_abort and failed / done > settings.max_failure_rate:
            stats.stop_reason = "failure rate"
            raise SearchAborted(
                f"search: {failed} of {done} trials failed ({failed / done:.0%}) > search.max_failure_rate="
                f"{settings.max_failure_rate}; see the failure classes in the study (last: {outcome.failure_class}: "
                f"{(outcome.root_cause or '')[:160]})"
            )
    return stats


def screen_check(study: Any) -> Optional[CostCheck]:
    """The study's cost check (the default env at both fidelities, stored with the baseline), None before it ran."""
    base = study.user_attrs.get(BASELINE_ATTR) or {}
    return CostCheck.from_json(base[SCREEN_ATTR]) if base.get(SCREEN_ATTR) else None


def screen_tally(study: Any, check: CostCheck) -> Tally:
    """search.screen.tally over the study's own screened trials (a cached repeat is no second verdict)."""
    from optuna.trial import TrialState

    return tally(check, [(t.user_attrs[SCREEN_ATTR], t.values[0] if t.state == TrialState.COMPLETE else None)
                         for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED))
                         if t.user_attrs.get(SCREEN_ATTR) and t.user_attrs.get("cached_from") is None])


def screened_count(study: Any) -> int:
    """Trials stopped at search.screen's cheap fidelity."""
    from optuna.trial import TrialState

    return sum(bool(t.user_attrs.get(SCREENED)) for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)))


def measure(study: Any, evaluate: Evaluator, number: int, setup: Setup, settings: SearchSettings,
            objectives: Sequence[Objective]) -> EvalOutcome:
    """The trial at the full fidelity; first at search.screen's cheap one (``evaluate.cheap``) once the study's cost
    check says it pays, and while enough trials stop there for it to buy trials (search.screen.still_pays). A failure
    at the cheap fidelity is the trial's failure (the full bench would start the same way); a cheap value below
    ``keep`` of the study's best cheap value stops the trial there (screened)."""
    cheap = getattr(evaluate, "cheap", None)
    check = screen_check(study) if settings.screen is not None and cheap is not None else None
    if check is None or not check.on:
        return evaluate(number, setup)
    so_far = screen_tally(study, check)
    if not still_pays(check.ratio, so_far.kept, so_far.stopped):
        return evaluate(number, setup)
    first = cheap(number, setup)
    if first.failed:
        first.attrs[SCREEN_ATTR] = {"value": None, "kept": False, "failed": True}  # where it failed: the cheap bench
        return first
    value, direction = first.values[0], objectives[0].direction
    record = {"value": value, "fidelity": first.attrs.get("fidelity")}
    if goes_on(value, best_cheap(so_far.cheap_values, direction), settings.screen.keep, direction):
        full = evaluate(number, setup)
        full.attrs[SCREEN_ATTR] = {**record, "kept": True}
        return full
    record.update(kept=False, estimate=estimate(value, so_far.both))
    return EvalOutcome(None, attrs={**first.attrs, SCREEN_ATTR: record, SCREENED: True}, screened=True)
