"""Once per study: of a fleet's workers one measures the default env and one confirms the winner, the others
say who does (or show what was found); and ``search.budget_s`` is one window for the study (:func:`budget_window`).

A job's claim is a study system attribute, e.g. ``envmatrix:confirm_claim`` = {id, worker_host, worker_pid,
worker_started, at}, set only where absent (search.ownership.insert_study_attr: one insert wins). Its owner
refreshes ``envmatrix:confirm_beat`` = {claim, t} while it works, and writes the job's result (the study user
attribute ``confirmation`` or ``baseline``) with the claim's id (``claim``), the worker (``by``) and, for the
confirmation, the finished trials it ranked (``over``). A worker reads them (:func:`job_role`):

- no claim: it claims;
- the claim's result is written and ranks as many finished trials as the study holds: done, it shows that result;
- that result ranks fewer (trials were added since, e.g. a resumed study): it takes the claim over, runs the job again;
- a claim without its result whose owner is alive: it defers (says who runs the job; app.search_confirm has a
  confirmation's deferrers read again until the verdict is written, which may then be stale or its owner dead);
- such a claim whose owner is gone (same host, dead pid), released (:func:`release`: interrupted) or silent past
  ``heartbeat_grace_s``: it takes it over
  (search.ownership.replace_study_attr: of several takers one wins).

:func:`job_role` is pure; :func:`claim` reads and writes the study, starts nothing.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from envmatrix.search.confirm import CONFIRM_ATTR
from envmatrix.search.ownership import insert_study_attr, pause_at, replace_study_attr, study_system_attr
from envmatrix.search.study import BASELINE_ATTR, Worker, counts_toward_budget, running_trials, stale_reason

CONFIRM_JOB, BASELINE_JOB = "confirm", "baseline"  # the jobs run once per study; JOBS: where each stores its result
JOBS = {CONFIRM_JOB: CONFIRM_ATTR, BASELINE_JOB: BASELINE_ATTR}
BUDGET_KEY = "envmatrix:budget_window"  # the study's search.budget_s window: {id, deadline, budget_s, worker..., at}
CLAIM = "claim"  # nobody has claimed the job: claim it
TAKE_OVER = "take_over"  # a stale claim or a stale result: replace the claim
DEFER = "defer"  # a live worker has claimed it
DONE = "done"  # its result is written and current


def claim_key(job: str) -> str:
    return f"envmatrix:{job}_claim"


def beat_key(job: str) -> str:
    return f"envmatrix:{job}_beat"


@dataclass(frozen=True)
class Role:
    kind: str  # CLAIM, TAKE_OVER, DEFER or DONE
    reason: str


def who(held: Mapping[str, Any]) -> str:
    return f"worker {held.get('worker_host')}:{held.get('worker_pid')}"


def job_role(held: Optional[Mapping[str, Any]], beat: Optional[Mapping[str, Any]], result: Optional[Mapping[str, Any]],
             finished: int, here: str, now: float, grace_s: float) -> Role:
    """What this worker does about a once-per-study job (see the module doc): ``held`` its claim, ``beat`` the
    claim's liveness record, ``result`` what the job stored; ``finished``: the study's finished trials that count
    (search.study.counts_toward_budget), 0 for a job that ranks none (the baseline)."""
    if not held:
        return Role(CLAIM, "no worker has claimed it")
    if result and result.get("claim") == held.get("id"):  # the claim's own result
        over = int(result.get("over") or 0)
        if over >= finished:
            return Role(DONE, f"{who(held)} has done it" + (f" over {over} finished trials" if over else ""))
        return Role(TAKE_OVER, f"{who(held)} did it over {over} finished trials; the study now holds {finished}")
    if beat and beat.get("claim") == held.get("id") and beat.get("released"):
        return Role(TAKE_OVER, f"{who(held)} claimed it, but {beat['released']}")
    beat_t = beat.get("t") if beat and beat.get("claim") == held.get("id") else None
    attrs = {**held, "heartbeat": beat_t} if beat_t is not None else dict(held)
    stale = stale_reason(attrs, here, now, grace_s, held.get("at"))
    if stale is not None:
        return Role(TAKE_OVER, f"{who(held)} claimed it, but {stale}")
    return Role(DEFER, f"{who(held)} has claimed it")


def finished_trials(study: Any) -> int:
    from optuna.trial import TrialState

    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
    return sum(counts_toward_budget(t) for t in done)


@dataclass(frozen=True)
class Claim:
    role: Role
    held: Optional[Mapping[str, Any]]  # the claim as it stands (this worker's own when it won it)
    result: Optional[Mapping[str, Any]]  # DONE: the job's current result

    @property
    def mine(self) -> bool:
        return self.role.kind in (CLAIM, TAKE_OVER)


def claim(study: Any, job: str, worker: Worker, grace_s: float, attempts: int = 5) -> Claim:
    """Read ``job``'s claim, beat and result and act on :func:`job_role`: a CLAIM or TAKE_OVER that this worker
    won (the claim is now its own), or a DEFER / DONE to report. A lost race reads again."""
    for _ in range(attempts):
        held = study_system_attr(study, claim_key(job))
        result = study.user_attrs.get(JOBS[job])
        finished = finished_trials(study) if job == CONFIRM_JOB else 0
        role = job_role(held, study_system_attr(study, beat_key(job)), result, finished, worker.host, time.time(), grace_s)
        if role.kind in (DEFER, DONE):
            return Claim(role, held, result if role.kind == DONE else None)
        mine = {"id": uuid.uuid4().hex, **worker.attrs(), "at": time.time()}
        won = (insert_study_attr(study, claim_key(job), mine) if role.kind == CLAIM
               else replace_study_attr(study, claim_key(job), str(held["id"]), mine))  # type: ignore[index]
        if won:
            pause_at(f"{job}_claimed")
            return Claim(role, mine, None)
    raise RuntimeError(f"search: the {job} claim of study {study.study_name!r} changed hands {attempts} times "
                       "while this worker read it")


def beat(study: Any, job: str, held: Mapping[str, Any]) -> None:
    """Refresh the liveness record of this worker's claim on ``job``."""
    study._storage.set_study_system_attr(study._study_id, beat_key(job), {"claim": held["id"], "t": time.time()})


def open_work(study: Any, grace_s: float) -> list[str]:
    """What the study's workers have yet to do before its export is final, one phrase each: trials running or
    queued, and a confirmation claimed and not written (or written over fewer trials than have finished since)."""
    import socket

    from optuna.trial import TrialState

    out = []
    running = len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
    queued = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
    if running or queued:
        out.append(f"{running} trials running and {queued} queued")
    role = confirm_role(study, grace_s, socket.gethostname(), time.time())
    if role is not None and role.kind != DONE:
        out.append(f"confirmation: {role.reason}")
    return out


def confirm_role(study: Any, grace_s: float, here: str, now: float) -> Optional[Role]:
    """The study's confirmation as a reader sees it (:func:`job_role`); None where nobody has claimed it (the study
    never reached its confirmation, or has none: search.confirm_top_k=0)."""
    held = study_system_attr(study, claim_key(CONFIRM_JOB))
    if not held:
        return None
    return job_role(held, study_system_attr(study, beat_key(CONFIRM_JOB)), study.user_attrs.get(CONFIRM_ATTR),
                    finished_trials(study), here, now, grace_s)


def release(study: Any, job: str, held: Mapping[str, Any], why: str) -> None:
    """This worker stops without a result (``why``): its claim is free to take over at once, even for a worker on
    another host, who cannot tell that its pid is gone and would wait out ``heartbeat_grace_s``."""
    study._storage.set_study_system_attr(study._study_id, beat_key(job),
                                         {"claim": held["id"], "t": time.time(), "released": why})


def store_result(study: Any, job: str, held: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """The job's result into the study, stamped with the claim and worker that produced it."""
    stamped = {**result, "claim": held["id"], "by": who(held)}
    study.set_user_attr(JOBS[job], stamped)
    return stamped


def window_role(held: Optional[Mapping[str, Any]], budget_s: float, now: float,
                fleet_at_work: bool) -> tuple[bool, float]:
    """(opens, deadline) for a worker starting its trials under ``search.budget_s``: it joins the study's window
    while its fleet is at work, even closed (a later worker must not outlast its peers and make their confirmation
    stale), and while it is open for the same budget (a study resumed inside its window gets the rest of it); it
    opens a new one where there is none, the last one closed, or a resumed study asks another budget."""
    if held and (fleet_at_work or (float(held["deadline"]) > now and float(held.get("budget_s", budget_s)) == budget_s)):
        return False, float(held["deadline"])
    return True, now + budget_s


def fleet_at_work(study: Any, grace_s: float) -> bool:
    """A live worker still runs a trial or the confirmation (a dead one's trials and claims do not count)."""
    import socket

    here, now = socket.gethostname(), time.time()
    if any(reason is None for _, reason in running_trials(study, grace_s, here, now)):
        return True
    role = confirm_role(study, grace_s, here, now)
    return role is not None and role.kind == DEFER


def budget_window(study: Any, budget_s: float, worker: Worker, grace_s: float, attempts: int = 5) -> float:
    """The wall-clock deadline (time.time(), so workers on several hosts need synchronised clocks) of the study's
    trials under ``search.budget_s`` (:func:`window_role`); a worker that opens a window writes it (one insert or
    replace wins; a loser reads again)."""
    for _ in range(attempts):
        held = study_system_attr(study, BUDGET_KEY)
        now = time.time()
        opens, deadline = window_role(held, budget_s, now, bool(held) and fleet_at_work(study, grace_s))
        if not opens:
            return deadline
        mine = {"id": uuid.uuid4().hex, "deadline": deadline, "budget_s": budget_s, **worker.attrs(), "at": now}
        won = (insert_study_attr(study, BUDGET_KEY, mine) if not held
               else replace_study_attr(study, BUDGET_KEY, str(held["id"]), mine))
        if won:
            return deadline
    raise RuntimeError(f"search: the budget window of study {study.study_name!r} changed hands {attempts} times "
                       "while this worker read it")
