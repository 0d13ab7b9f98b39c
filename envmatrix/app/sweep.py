"""The sweep driver: plan -> (skip done) -> execute each run -> commit at once."""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Mapping

from envmatrix.config.resolve import SweepInput
from envmatrix.engine import Session, TrialProgress, run_trials
from envmatrix.engine.trial import Listener, trial_workdir
from envmatrix.planning.plan import Run, plan_runs
from envmatrix.probes import get_probe
from envmatrix.results import ProbeResult
from envmatrix.judgement.thresholds import judge

SweepProgress = TrialProgress  # a sweep's progress is the engine's (reporting.console.Progress reads it)


def sweep_id(inp: SweepInput, runs: list[Run]) -> str:
    canon = json.dumps(sorted(r.key for r in runs))
    return f"{inp.name}-{hashlib.sha256(canon.encode()).hexdigest()[:10]}"


DRY_RUN_PORT = 29500  # torch's default; a real run picks a free port when it launches


def plan_sweep(inp: SweepInput) -> list[Run]:
    return plan_runs(inp.setups, inp.grids, inp.probe, inp.backend, inp.launcher_key)


def run_sweep(inp: SweepInput, session: Session, rerun: bool = False, listener: Listener | None = None) -> tuple[str, list[Run], list[ProbeResult]]:
    runs = plan_sweep(inp)
    sid = sweep_id(inp, runs)
    session.store.open_sweep(sid, {"config": inp.config, "conf_file": str(inp.conf_file), "runs": [r.key for r in runs]})
    run_trials(session.under(sweep_id=sid, judge=lambda result: judge(result, inp.expectations)), runs, rerun=rerun,
               listener=listener)
    # A stored result may come from another command (bisect, search) under another
    # name for the same env: report it under this sweep's setup names.
    by_key = {r.key: r for r in runs}
    results = session.store.latest(run_keys=list(by_key))
    for result in results:
        result.setup = by_key[result.run_key].setup.to_json()
        # The current expect:/--baseline judge results stored by an earlier run too; a changed verdict is
        # stored as a new attempt of the same measurement, so every report read from the store agrees.
        before = result.outcome
        if judge(result, inp.expectations).outcome != before:
            session.store.put(result)
    return sid, runs, results


def dry_run(inp: SweepInput, runs: list[Run], run_dir: str, base_env: Mapping[str, str], inherited_env: Mapping[str, str],
            pins: Mapping[str, str], gpus: int, python: str = sys.executable) -> list[dict]:
    """Per run, the exact launch (argv, env, shell line) that run_sweep would start; starts nothing.

    Only the port differs from a real run (picked free at launch time); the result dir is
    logs/<run>/dry-run instead of a timestamp.
    """
    from envmatrix.engine.launch import launch_context
    from envmatrix.launchers.render import plan_json

    launcher, probe = inp.make_launcher(), get_probe(inp.probe.name)
    out = []
    for i, run in enumerate(runs, 1):
        workdir = trial_workdir(run_dir, run, None, "dry-run")
        plan = launcher.build(run, launch_context(run, probe, workdir, inherited_env, pins, gpus, python, DRY_RUN_PORT))
        out.append({"index": i, "grid": run.grid.label, "setup": run.setup.name, "run_key": run.key,
                    "launcher": inp.launcher, **plan_json(plan, base_env, workdir)})
    return out


