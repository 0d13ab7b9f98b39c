"""The sweep driver: plan -> (skip done) -> execute each run -> commit at once."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from envmatrix.config.resolve import SweepInput
from concurrent.futures import ThreadPoolExecutor, as_completed

from envmatrix.execution.pool import WarmPool
from envmatrix.execution.runner import execute
from envmatrix.planning.packing import pack_batches
from envmatrix.planning.plan import Run, plan_runs
from envmatrix.probes import get_probe
from envmatrix.results import ProbeResult
from envmatrix.store.base import ResultStore
from envmatrix.reporting.thresholds import judge


def sweep_id(inp: SweepInput, runs: list[Run]) -> str:
    canon = json.dumps(sorted(r.key for r in runs))
    return f"{inp.name}-{hashlib.sha256(canon.encode()).hexdigest()[:10]}"


@dataclass
class SweepProgress:
    total: int
    skipped: int = 0
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


DRY_RUN_PORT = 29500  # torch's default; a real run picks a free port when it launches
Listener = Callable[[str, SweepProgress, Optional[ProbeResult]], None]


def plan_sweep(inp: SweepInput) -> list[Run]:
    return plan_runs(inp.setups, inp.grids, inp.probe, inp.backend, inp.launcher_key)


def run_sweep(
    inp: SweepInput,
    store: ResultStore,
    run_dir: str,
    inherited_env: Mapping[str, str],
    pins: Mapping[str, str],
    gpus: int,
    host: dict,
    rerun: bool = False,
    listener: Optional[Listener] = None,
    pool: bool | WarmPool = True,
    jobs: int | str = 1,
) -> tuple[str, list[Run], list[ProbeResult]]:
    """``pool``: True starts a warm pool for the local launcher, a WarmPool is used as is (the caller
    started it early and closes it), False starts every rank cold."""
    runs = plan_sweep(inp)
    sid = sweep_id(inp, runs)
    store.open_sweep(sid, {"config": inp.config, "conf_file": str(inp.conf_file), "runs": [r.key for r in runs]})
    done = set() if rerun else store.completed_keys(r.key for r in runs)
    progress = SweepProgress(total=len(runs), skipped=len(done))
    launcher, probe = inp.make_launcher(), get_probe(inp.probe.name)
    notify = listener or (lambda *_: None)
    notify("start", progress, None)
    todo = [run for run in runs if run.key not in done]

    def workdir_of(run: Run) -> str:
        return run_workdir(run_dir, run, f"{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**9:09d}")

    def finish(result: ProbeResult) -> None:
        # Only this (the driver's) thread touches the store.
        result.sweep_id, result.host = sid, host
        judge(result, inp.expectations)
        store.put(result)
        progress.done += 1
        progress.passed += result.passed
        progress.failed += not result.passed
        notify("result", progress, result)

    local = getattr(launcher, "name", "") == "local"
    given = pool if isinstance(pool, WarmPool) else None
    if given is not None and not (local and todo):
        given.close()  # prestarted for nothing: free the cores now
    warm = (given or WarmPool(inherited_env)) if pool is not False and local and todo else None
    batches = pack_batches(todo, inp.backend, gpus, jobs, os.cpu_count() or 1, inherited_env.get("CUDA_VISIBLE_DEVICES"))
    if warm is not None:
        warm.rebase(inherited_env)
        warm.warm(sum(p.run.grid.world for p in batches[0]))  # the first batch's ranks import torch together
    try:
        for batch in batches:
            for run in batch:
                progress.current = run
                notify("run", progress, None)
            if len(batch) == 1 and batch[0].cuda_visible is None:
                run = batch[0].run
                finish(execute(run, launcher, probe, workdir_of(run), inherited_env, pins, gpus, pool=warm))
                continue
            with ThreadPoolExecutor(len(batch)) as ex:
                futures = [
                    ex.submit(execute, p.run, launcher, probe, workdir_of(p.run), p.env(inherited_env), pins, p.gpus(gpus), pool=warm)
                    for p in batch
                ]
                for fut in as_completed(futures):
                    finish(fut.result())
    finally:
        if warm is not None and given is None:
            warm.close()
    progress.current = None
    notify("end", progress, None)
    # A stored result may come from another command (bisect, search) under another
    # name for the same env: report it under this sweep's setup names.
    by_key = {r.key: r for r in runs}
    results = store.latest(run_keys=list(by_key))
    for result in results:
        result.setup = by_key[result.run_key].setup.to_json()
        # The current expect:/--baseline judge results stored by an earlier run too; a changed verdict is
        # stored as a new attempt of the same measurement, so every report read from the store agrees.
        before = result.outcome
        if judge(result, inp.expectations).outcome != before:
            store.put(result)
    return sid, runs, results


def dry_run(inp: SweepInput, runs: list[Run], run_dir: str, base_env: Mapping[str, str], inherited_env: Mapping[str, str],
            pins: Mapping[str, str], gpus: int, python: str = sys.executable) -> list[dict]:
    """Per run, the exact launch (argv, env, shell line) that run_sweep would start; starts nothing.

    Only the port differs from a real run (picked free at launch time); the result dir is
    logs/<run>/dry-run instead of a timestamp.
    """
    from envmatrix.execution.runner import launch_context
    from envmatrix.launchers.render import plan_json

    launcher, probe = inp.make_launcher(), get_probe(inp.probe.name)
    out = []
    for i, run in enumerate(runs, 1):
        workdir = run_workdir(run_dir, run, "dry-run")
        plan = launcher.build(run, launch_context(run, probe, workdir, inherited_env, pins, gpus, python, DRY_RUN_PORT))
        out.append({"index": i, "grid": run.grid.label, "setup": run.setup.name, "run_key": run.key,
                    "launcher": inp.launcher, **plan_json(plan, base_env, workdir)})
    return out


def run_workdir(run_dir: str, run: Run, attempt: str) -> str:
    return os.path.join(run_dir, "logs", f"{run.grid.label}_{_safe(run.setup.name)}_{run.key}", attempt)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40]
