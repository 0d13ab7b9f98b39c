"""Run trials: (setup, grid) -> a stored ProbeResult, reused by run key unless asked to run again."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence, Union

from envmatrix.boundary import ECHO_NAMES, is_echoed
from envmatrix.engine.session import Session
from envmatrix.env.atoms import Setup, atoms_from_mapping
from envmatrix.paths import file_safe
from envmatrix.planning.grid import Grid
from envmatrix.planning.plan import Run, run_key
from envmatrix.results import ProbeResult


@dataclass
class TrialProgress:
    total: int
    skipped: int = 0
    skipped_failed: int = 0  # of the skipped: stored results that did not pass (--rerun runs them again)
    rerun: int = 0  # of the runs: stored ones measured again (--rerun)
    done: int = 0
    passed: int = 0
    failed: int = 0
    current: Optional[Run] = None
    started: float = field(default_factory=time.time)

    @property
    def remaining(self) -> int:
        return self.total - self.skipped - self.done

    def eta_s(self) -> Optional[float]:
        if not self.done:
            return None
        return (time.time() - self.started) / self.done * self.remaining


@dataclass
class Trial:
    result: ProbeResult
    launched: bool  # False: the stored result of the same run key was reused
    attempt: Optional[int] = None  # the store's attempt number of a launched run


Listener = Callable[[str, TrialProgress, Optional[ProbeResult]], None]


def plan_trial(session: Session, setup: Union[Setup, Mapping[str, str]], grid: Grid, name: str = "env") -> Run:
    if not isinstance(setup, Setup):
        setup = Setup(name, atoms_from_mapping(dict(setup), name))
    key = run_key(setup, grid, session.probe_spec, session.backend, session.launcher_key)
    return Run(key, setup, grid, session.probe_spec, session.backend, session.launcher_key)


def run_trial(
    session: Session,
    setup: Union[Setup, Mapping[str, str], Run],
    grid: Optional[Grid] = None,
    *,
    reuse: bool = True,
    label: Optional[str] = None,
    cuda_visible: Optional[str] = None,
) -> Trial:
    """The one place a trial runs: reuse the stored result of the same run key (any command's) when
    ``reuse``, else launch it, stamp it with the session's sweep id and host facts and commit it.
    ``cuda_visible`` narrows the GPUs to a packed lane's set."""
    run = setup if isinstance(setup, Run) else plan_trial(session, setup, grid)
    if reuse:
        for stored in session.store.latest(run_keys=[run.key]):
            if reusable(session, stored):
                return Trial(stored, False)
    return _commit(session, _launch(session, run, label, cuda_visible))


def _launch(session: Session, run: Run, label: Optional[str], cuda_visible: Optional[str]) -> ProbeResult:
    """Start the run's processes and read their verdict; touches no store (packed lanes call it from threads)."""
    from envmatrix.engine.launch import execute

    environ, gpus = session.environ, session.gpus
    if cuda_visible is not None:
        environ, gpus = {**environ, "CUDA_VISIBLE_DEVICES": cuda_visible}, len(cuda_visible.split(","))
    workdir = trial_workdir(session.run_dir, run, label, f"{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**9:09d}")
    if run.network is None:
        result = execute(run, session.launcher, session.probe, workdir, environ, session.pins, gpus, pool=session.pool,
                         host_seats=session.host_seats)
    else:
        from envmatrix.engine.network import no_shaping

        if run.shaped and session.shaper is None:  # never measure a shaped condition's cell unshaped
            from envmatrix.errors import PlanError

            raise PlanError(f"network {run.network.name}: nothing to shape for launcher {session.launcher_key}; "
                            "allowed: an emulated cluster (envmatrix cluster up) or a cluster launcher with "
                            "network_options.interface")
        with (session.shaper if run.shaped else no_shaping)(run, workdir) as record:
            result = execute(run, session.launcher, session.probe, workdir, environ, session.pins, gpus,
                             pool=session.pool, host_seats=session.host_seats)
        result.network = record.to_json()  # filled once the links are restored: the proof's "after" included
    result.sweep_id, result.host = session.sweep_id, session.host
    result.inherited_env = inherited_env(session.environ)
    if session.judge is not None:
        session.judge(result)
    return result


# Set per run by the launcher, envmatrix's own, or the allocation's GPUs (placement records which ran): not the env a
# run measures, and a resubmitted job's may differ.
_NOT_INHERITED = ("MASTER_", "ENVMATRIX_", "CUDA_VISIBLE_DEVICES")
# which programs and which torch the ranks run: `module load` of another nccl-tests changes PATH only
_SEARCH_PATHS = ("PATH", "PYTHONPATH")


def inherited_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The caller's variables every rank inherits that can change what a run measures: the families ranks echo
    (NCCL_*, FI_*, LD_*, ...; the safety pins among them) and the search paths, outside the run key, which hashes
    the setup only."""
    return {k: v for k, v in sorted(environ.items())
            if (is_echoed(k) and k not in ECHO_NAMES and not k.startswith(_NOT_INHERITED)) or k in _SEARCH_PATHS}


def reusable(session: Session, stored: ProbeResult) -> bool:
    """A stored result stands for a run only when its ranks inherited what this session's would: a sweep resumed
    after `module load` of another NCCL (LD_LIBRARY_PATH) or an exported NCCL_IB_HCA measures again."""
    return stored.inherited_env is None or stored.inherited_env == inherited_env(session.environ)


def _commit(session: Session, result: ProbeResult) -> Trial:
    # only the session's own thread: sqlite connections stay in their thread
    return Trial(result, True, session.store.put(result))


def run_trials(session: Session, runs: Sequence[Run], *, rerun: bool = False, listener: Optional[Listener] = None) -> None:
    """Planned runs, resumed (finished run keys skipped) and packed side by side on disjoint GPU sets
    when ``session.jobs`` allows. Results go to the store; ``listener`` hears start/run/result/end."""
    from envmatrix.planning.packing import pack_batches

    stored = session.store.completed_keys(r.key for r in runs)
    reused = [r for r in session.store.latest(run_keys=list(stored)) if reusable(session, r)] if stored and not rerun else []
    done = {r.run_key for r in reused}
    failed_before = sum(not r.passed for r in reused)
    progress = TrialProgress(total=len(runs), skipped=len(done), skipped_failed=failed_before,
                             rerun=len(stored) if rerun else 0)
    notify = listener or (lambda *_: None)
    notify("start", progress, None)
    todo = [run for run in runs if run.key not in done]

    def finish(result: ProbeResult) -> None:
        # Only the calling thread counts, notifies and commits.
        progress.done += 1
        progress.passed += result.passed
        progress.failed += not result.passed
        notify("result", progress, result)

    batches = pack_batches(todo, session.backend, session.gpus, session.jobs, os.cpu_count() or 1,
                           session.environ.get("CUDA_VISIBLE_DEVICES"))
    if session.pool is not None and batches:
        session.pool.warm(sum(p.run.grid.world for p in batches[0]))  # the first batch's ranks import torch together
    elif session.pool is not None:
        session.pool.close()  # everything was in the store: free the servers' cores for the report
    for batch in batches:
        for packed in batch:
            progress.current = packed.run
            notify("run", progress, None)
        if len(batch) == 1:
            finish(run_trial(session, batch[0].run, reuse=False, cuda_visible=batch[0].cuda_visible).result)
            continue
        with ThreadPoolExecutor(len(batch)) as ex:
            futures = [ex.submit(_launch, session, p.run, None, p.cuda_visible) for p in batch]
            for fut in as_completed(futures):
                finish(_commit(session, fut.result()).result)
    progress.current = None
    notify("end", progress, None)


def run_at_once(items: Sequence[tuple[Session, Run, Optional[str]]]) -> list[Trial]:
    """(session, run, label) trials launched at the same time (on disjoint hosts: host bisect's rounds),
    committed by the calling thread in the order given."""
    with ThreadPoolExecutor(max(1, len(items))) as ex:
        results = list(ex.map(lambda item: _launch(item[0], item[1], item[2], None), items))
    return [_commit(session, result) for (session, _, _), result in zip(items, results)]


def trial_workdir(run_dir: str, run: Run, label: Optional[str], attempt: str) -> str:
    return os.path.join(run_dir, "logs", f"{run.grid.label}_{file_safe(label or run.setup.name)}_{run.key}", attempt)
