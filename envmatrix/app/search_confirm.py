"""Once per study: the default env measured and the winner confirmed (the top trials and the default env
re-measured in interleaved rounds) by one worker of a fleet.

Every worker reaches both jobs; one claims each (search.fleet). The confirmer first waits for the trials other
workers still run (failing those whose worker died, as a starting worker does). The others say who runs the job
or, when its result is already written, show it; for the confirmation they wait for the verdict, and confirm again
when it ranks fewer trials than the study holds by then or its confirmer died.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from envmatrix import interrupts


def once_per_study(study: Any, job: str, settings: Any, say: Callable[[str], None], what: str, after: str,
                   work: Callable[[Any], Optional[dict]], wait: bool = False,
                   nothing: str = "nothing to do") -> Optional[dict]:
    """Run ``work(worker)`` when this worker wins ``job``'s claim (search.fleet) and store its result; else say who
    runs it (``after``: where its result will be) or return the result already stored. ``wait``: a claim another
    worker holds is waited on until its result is written and current (shown then), or its worker died, or the
    study outgrew it (this worker takes it over then). None: another worker runs it, or ``work`` found ``nothing``
    to do (the claim is released then: a worker waiting on it need not wait out the grace)."""
    from envmatrix.search import fleet
    from envmatrix.search.study import Heartbeat, Worker

    worker = Worker.me()
    got = fleet.claim(study, job, worker, settings.heartbeat_grace_s)
    deferred = False
    while got.role.kind == fleet.DEFER:
        held = got.held
        assert held is not None
        if not deferred:
            say(f"{what}: {got.role.reason} ({time.time() - float(held['at']):.0f} s ago); {after}")
            deferred = True
        if not wait:
            return None
        time.sleep(min(1.0, settings.heartbeat_interval_s))
        got = fleet.claim(study, job, worker, settings.heartbeat_grace_s)
    if got.role.kind == fleet.DONE:
        say(f"{what}: {got.role.reason}")
        return dict(got.result or {})
    held = got.held
    assert held is not None
    if got.role.kind == fleet.TAKE_OVER:
        say(f"{what}: {got.role.reason}: this worker takes it over")
    fleet.beat(study, job, held)
    try:
        with Heartbeat(lambda: fleet.beat(study, job, held), settings.heartbeat_interval_s):
            result = work(worker)
    except KeyboardInterrupt:
        fleet.release(study, job, held, f"it was interrupted ({interrupts.described()})")
        raise
    if result is None:  # freed: a worker waiting on this claim from another host would wait out heartbeat_grace_s
        fleet.release(study, job, held, f"it found {nothing}")
        return None
    return fleet.store_result(study, job, held, result)


def confirm_once(study: Any, space: Any, objectives: Any, evaluator: Any, settings: Any,
                 say: Callable[[str], None]) -> Optional[dict]:
    """The study's confirmation, by the one worker that claims it once the trials still running have finished."""
    from envmatrix.search.fleet import CONFIRM_JOB, finished_trials

    def work(worker: Any) -> Optional[dict]:
        wait_for_running(study, settings, worker, say)
        over = finished_trials(study)
        data = confirm_winner(study, space, objectives, evaluator, settings, say)
        return None if data is None else {**data, "over": over}

    # waited for: trials this worker added while that confirmation ran (a later start, a larger --trials, budget_s)
    # make its verdict stale, and a confirmer that dies leaves none; the last worker standing confirms then
    return once_per_study(study, CONFIRM_JOB, settings, say, "confirmation",
                          "this worker waits for its verdict, which goes to the study, where `envmatrix export` reads it",
                          work, wait=True, nothing="no completed trial to confirm")


def wait_for_running(study: Any, settings: Any, worker: Any, say: Callable[[str], None], poll_s: float = 1.0) -> None:
    """Until no trial is RUNNING: other workers' last trials may be the winner. A trial whose worker died is failed
    (search.study.recover_stale), so a dead worker holds this up for at most ``heartbeat_grace_s``."""
    from optuna.trial import TrialState

    from envmatrix.search.study import recover_stale

    said = False
    while True:
        recover_stale(study, settings.heartbeat_grace_s, worker.host)
        running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if not running:
            return
        if not said:
            owners = sorted({f"{t.user_attrs.get('worker_host')}:{t.user_attrs.get('worker_pid')}" for t in running})
            say(f"confirmation: waiting for {len(running)} trials still running (workers {', '.join(owners)})")
            said = True
        time.sleep(min(poll_s, settings.heartbeat_interval_s))


def confirm_winner(study: Any, space: Any, objectives: Any, evaluator: Any, settings: Any,
                   say: Callable[[str], None]) -> Optional[dict]:
    """Re-measure the top trials and the default env; returns the verdict (search.confirm.to_json; None: no trial
    to confirm). confirm_once stores it in the study."""
    from envmatrix.env.atoms import Setup
    from envmatrix.search.confirm import DEFAULT, confirm, to_json
    from envmatrix.search.export import ranked

    top, seen = [], set()
    for t in ranked(study, objectives):
        key = tuple(sorted(t.params.items()))
        if key not in seen:
            seen.add(key)
            top.append(t)
    top = top[:settings.confirm_top_k]
    if not top:
        return None
    by_number = {t.number: t for t in top}
    labels = [t.number for t in top] + ([DEFAULT] if settings.baseline else [])
    sign = 1.0 if objectives[0].direction == "maximize" else -1.0

    def measure(rnd: int, label: Any) -> Any:
        name = "default" if label == DEFAULT else f"t{label:04d}"
        setup = Setup("default", (), origin="baseline") if label == DEFAULT else space.setup_of_params(by_number[label].params)
        out = evaluator.measure(f"confirm{rnd}_{name}", setup)
        return None if out.failed else out.values[0]

    say(f"confirm: re-measuring trials {', '.join(str(t.number) for t in top)}"
        f"{' and the default env' if settings.baseline else ''} in interleaved rounds")
    data = to_json(confirm(labels, measure, sign, settings.confirm_repeats, settings.confirm_max_repeats), sign)
    return data
