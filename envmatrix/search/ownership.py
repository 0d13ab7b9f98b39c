"""A fleet's shared study: what a worker takes and the record that it took it, in one transaction.

Workers of a fleet share one Optuna study (``search.storage``). Two facts must never be apart in it:

- a RUNNING trial and its owner (``worker_host``, ``worker_pid``, ``worker_started``, ``heartbeat``).
  ``Study.ask`` creates (or pops) the trial in one transaction and the owner followed in others, so a worker
  killed between them left a RUNNING trial no one could tell was dead until its heartbeat grace ran out
  (300 s by default). :func:`ask_owned` writes both at once: a new trial through the storage's
  ``create_new_trial`` with a template that carries the owner (Optuna inserts the trial and its attributes in
  one transaction); an enqueued (WAITING) trial by one conditional UPDATE (to RUNNING only while still WAITING,
  so two workers never both take it) and its owner rows, committed together.
- a dead worker's trial and why it failed: :func:`fail_running` turns it FAIL only while it is still RUNNING, with
  its reasons, in one transaction (of several workers recovering it one wins, and re-enqueues its params once).
- a claim and its key: :func:`insert_study_attr` adds a study system attribute only where it is absent (the
  table's unique (study, key) makes that atomic on SQLite and PostgreSQL alike); :func:`replace_study_attr`
  swaps it only while it still holds the claim id the caller read (a take-over several workers cannot all win).

Optuna's in-memory storage (one process, the benchmarks and unit tests) takes the same calls: nothing outlives a
killed process there, so its two writes cannot be torn apart by a kill.

``ENVMATRIX_TEST_PAUSE_AT=<point>`` stops this worker (SIGSTOP) at a named point so that a test can SIGKILL it
exactly there: ``asked`` (a trial and its owner were just written), ``baseline_claimed`` / ``confirm_claimed``
(this worker just claimed the study's baseline / confirmation, search.fleet). Unset, :func:`pause_at` does nothing.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from datetime import datetime, timezone
from typing import Any, Mapping, Optional

PAUSE_VAR = "ENVMATRIX_TEST_PAUSE_AT"


def pause_at(point: str) -> None:
    """Stop here when the tests asked for this point (see the module doc)."""
    if os.environ.get(PAUSE_VAR) == point:
        print(f"envmatrix: paused at {point} ({PAUSE_VAR})", file=sys.stderr, flush=True)
        signal.raise_signal(signal.SIGSTOP)


def rdb_backend(study: Any) -> Optional[Any]:
    """The study's RDBStorage (under Optuna's cache), or None for another storage (in-memory)."""
    from optuna.storages import RDBStorage

    backend = getattr(study._storage, "_backend", study._storage)
    return backend if isinstance(backend, RDBStorage) else None


def ask_owned(study: Any, owner: Mapping[str, Any]) -> Any:
    """``study.ask()`` whose trial carries ``owner`` as user attributes from the transaction that made it RUNNING:
    the oldest WAITING trial this worker can take, else a new one."""
    import optuna

    study._thread_local.cached_all_trials = None  # as Study.ask: read the storage afresh once per trial
    trial_id = _take_waiting(study, owner)
    if trial_id is None:
        trial_id = study._storage.create_new_trial(study._study_id, template_trial=_running(owner))
    pause_at("asked")
    return optuna.trial.Trial(study, trial_id)


def _running(owner: Mapping[str, Any]) -> Any:
    from optuna.trial import FrozenTrial, TrialState

    return FrozenTrial(number=-1, state=TrialState.RUNNING, value=None, datetime_start=datetime.now(),
                       datetime_complete=None, params={}, distributions={}, user_attrs=dict(owner), system_attrs={},
                       intermediate_values={}, trial_id=-1)


def _take_waiting(study: Any, owner: Mapping[str, Any]) -> Optional[int]:
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    backend = rdb_backend(study)
    for t in study._storage.get_all_trials(study._study_id, deepcopy=False, states=(TrialState.WAITING,)):
        if backend is not None:
            if _take_waiting_rdb(backend, t._trial_id, owner):
                return t._trial_id
            continue
        try:  # in-memory: one process, so the attributes cannot be lost apart from the state
            if not study._storage.set_trial_state_values(t._trial_id, state=TrialState.RUNNING):
                continue
        except UpdateFinishedTrialError:
            continue
        for key, value in owner.items():
            study._storage.set_trial_user_attr(t._trial_id, key, value)
        return t._trial_id
    return None


def _take_waiting_rdb(backend: Any, trial_id: int, owner: Mapping[str, Any]) -> bool:
    """WAITING -> RUNNING and the owner rows in one transaction; False when another worker took it first."""
    import sqlalchemy
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session
    from optuna.trial import TrialState

    table = models.TrialModel.__table__
    with _create_scoped_session(backend.scoped_session) as session:
        # one statement decides: the row changes only while it is still WAITING (a row lock on PostgreSQL,
        # the database write lock on SQLite), so of two workers exactly one sees rowcount 1
        taken = session.execute(
            sqlalchemy.update(table)
            .where(table.c.trial_id == trial_id, table.c.state == TrialState.WAITING)
            .values(state=TrialState.RUNNING, datetime_start=datetime.now(timezone.utc).replace(tzinfo=None))
        ).rowcount
        if taken != 1:
            return False
        for key, value in owner.items():
            backend._set_trial_attr_without_commit(session, models.TrialUserAttributeModel, trial_id, key, value)
    return True


def fail_running(study: Any, trial_id: int, attrs: Mapping[str, Any]) -> bool:
    """RUNNING -> FAIL with ``attrs`` (why) as user attributes, in one transaction; False when the trial was no longer
    RUNNING (another worker failed it first, or its worker told it). Optuna's ``set_trial_state_values`` reads the
    state and then writes it, which SQLite does not lock in between: two workers recovering one dead trial both
    failed it and both re-enqueued its params."""
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    backend = rdb_backend(study)
    if backend is None:  # in-memory: one process
        try:
            for key, value in attrs.items():
                study._storage.set_trial_user_attr(trial_id, key, value)
            return bool(study._storage.set_trial_state_values(trial_id, TrialState.FAIL))
        except UpdateFinishedTrialError:
            return False
    import sqlalchemy
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session

    table, attr_table = models.TrialModel.__table__, models.TrialUserAttributeModel.__table__
    with _create_scoped_session(backend.scoped_session) as session:
        # as _take_waiting_rdb: one statement decides, the row changes only while it is still RUNNING (the loser
        # writes nothing; its reasons go in below by plain statements, Optuna's would refuse a FAIL trial)
        failed = session.execute(
            sqlalchemy.update(table)
            .where(table.c.trial_id == trial_id, table.c.state == TrialState.RUNNING)
            .values(state=TrialState.FAIL, datetime_complete=datetime.now())
        ).rowcount
        if failed != 1:
            return False
        for key, value in attrs.items():
            mine = (attr_table.c.trial_id == trial_id, attr_table.c.key == key)
            session.execute(sqlalchemy.delete(attr_table).where(*mine))
            session.execute(sqlalchemy.insert(attr_table).values(trial_id=trial_id, key=key, value_json=json.dumps(value)))
    return True


# ---------------------------------------------------------------- study-level claims


def study_system_attr(study: Any, key: str) -> Any:
    return study._storage.get_study_system_attrs(study._study_id).get(key)


def insert_study_attr(study: Any, key: str, value: Any) -> bool:
    """Set the study system attribute ``key`` only where it is absent; True when this call set it."""
    backend = rdb_backend(study)
    if backend is None:
        if study_system_attr(study, key) is not None:
            return False
        study._storage.set_study_system_attr(study._study_id, key, value)
        return True
    import sqlalchemy.exc
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session

    try:
        with _create_scoped_session(backend.scoped_session) as session:
            session.add(models.StudySystemAttributeModel(study_id=study._study_id, key=key, value_json=json.dumps(value)))
    except sqlalchemy.exc.IntegrityError:  # another worker's row is there: unique (study_id, key)
        return False
    return True


def replace_study_attr(study: Any, key: str, expected_id: str, value: Any) -> bool:
    """Replace the study system attribute ``key`` with ``value`` only while it still holds the claim whose ``id``
    is ``expected_id``; True when this call replaced it."""
    backend = rdb_backend(study)
    if backend is None:
        held = study_system_attr(study, key)
        if not isinstance(held, Mapping) or held.get("id") != expected_id:
            return False
        study._storage.set_study_system_attr(study._study_id, key, value)
        return True
    import sqlalchemy
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session

    table = models.StudySystemAttributeModel.__table__
    where = (table.c.study_id == study._study_id, table.c.key == key)
    with _create_scoped_session(backend.scoped_session) as session:
        raw = session.execute(sqlalchemy.select(table.c.value_json).where(*where)).scalar_one_or_none()
        if raw is None or (json.loads(raw) or {}).get("id") != expected_id:
            return False
        # the UPDATE matches only the text just read: a worker that replaced it in between makes this one match nothing
        swapped = session.execute(sqlalchemy.update(table).where(*where, table.c.value_json == raw)
                                  .values(value_json=json.dumps(value))).rowcount
    return swapped == 1
