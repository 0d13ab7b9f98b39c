"""``envmatrix sweep``'s lifecycle: prepare -> plan once -> (dry run | one session: run, store, judge) -> reports.

:func:`sweep` takes a :class:`SweepRequest` (what the command line asked) and returns a :class:`SweepPlan` (a dry
run) or a :class:`SweepResult`; the command line renders either. bench runs its one-run sweeps through
:func:`run_sweep`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from envmatrix import paths as em_paths, values
from envmatrix.app.inputs import allows_ignored, check_probe_runs, prepare
from envmatrix.app.network_axis import (plan_shaping, shaping_missed, shaping_session, with_flags, with_shaping_missed,
                                        write_condition_tables)
from envmatrix.app.outputs import RunOutputs, write_run_outputs
from envmatrix.app.report import stored_cells, whole_store
from envmatrix.config.resolve import SweepInput
from envmatrix.engine import Session, TrialProgress, open_session, run_trials
from envmatrix.engine.trial import Listener, trial_workdir
from envmatrix.errors import EXIT_FAILURES, EXIT_INCONCLUSIVE, EXIT_OK, ConfigError
from envmatrix.planning.plan import Run, plan_runs
from envmatrix.probes import get_probe
from envmatrix.results import ProbeResult
from envmatrix.judgement.thresholds import judge

SweepProgress = TrialProgress  # a sweep's progress is the engine's (reporting.console.Progress reads it)


@dataclass(frozen=True)
class SweepRequest:
    overrides: tuple[str, ...] = ()
    out: Optional[str] = None
    dry_run: bool = False
    json: bool = False  # the dry run's plan as JSON
    allow_unknown_vars: bool = False
    allow_ignored_vars: bool = False
    rerun: bool = False
    junit: Optional[str] = None
    jobs: str = "1"
    pool: bool = True  # a warm pool of torch-imported forks for local ranks
    baseline: Optional[str] = None
    tolerance: Optional[str] = None
    command_line: str = "envmatrix sweep"  # who holds the store's lock
    network: tuple[str, ...] = ()  # --network conditions (replace the config's network: axis)


@dataclass(frozen=True)
class SweepPlan:
    """A dry run: every run and its exact launch; nothing started or written."""

    inp: SweepInput
    runs: list[Run]
    run_dir: str
    launches: list[dict]
    note: str = ""  # outside a batch allocation: what the placeholders stand for


@dataclass(frozen=True)
class SweepResult:
    inp: SweepInput
    runs: list[Run]
    results: list[ProbeResult]
    matrix: Any  # reporting.matrix.Matrix
    title: str
    reports: list[str]  # matrix.md, results.json, ...
    outputs: RunOutputs
    exit_code: int
    shaping_missed: list[str] = field(default_factory=list)  # cells whose condition was not in effect

    @property
    def store_path(self) -> str:
        return os.path.join(self.outputs.run_dir, em_paths.STORE_FILE)


def sweep(request: SweepRequest, listener: Optional[Listener] = None,
          warn: Callable[[str], None] = lambda line: None) -> SweepPlan | SweepResult:
    """``warn`` gets the line about varied variables the backend never reads; ``listener`` each run's progress."""
    from envmatrix.bench.expect import unmeasured_warning
    from envmatrix.catalog.backends import check_varied
    from envmatrix.execution.pool import WarmPool, likely_ranks
    from envmatrix.planning.packing import parse_jobs
    from envmatrix.store.sqlite import check_not_corrupt
    from envmatrix.strategies import merged_notes

    inp, gpus, pins, _ = prepare(request.overrides, request.allow_unknown_vars, request.baseline, request.tolerance,
                                 dry_run=request.dry_run)
    inp = with_flags(inp, request.network)
    try:
        jobs = parse_jobs(request.jobs)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if request.junit is not None:
        values.output_file("--junit", request.junit, "junit")
    # where results would go is checked first: those errors name the file, and nothing is created before them
    run_dir = em_paths.run_dir(request.out, inp.name, create=False)
    check_not_corrupt(os.path.join(run_dir, em_paths.STORE_FILE))
    atoms = [a for s in inp.setups for a in s.atoms]
    # backend=auto falling back to gloo on a GPU-less host is not the user's choice: warn, do not refuse.
    warning = check_varied(inp.backend, atoms, "sweep", allow=allows_ignored(inp, request.allow_ignored_vars),
                           probe=inp.probe.name)
    unjudged = unmeasured_warning(inp.expectations, inp.probe.params.get("bench"), inp.probe.name,
                                  {g.label: g.world for g in inp.grids})
    # said once the input has passed every check: a refusal is one line, not a warning and then the error
    # (--network on a CPU host, an --out that cannot be made)
    # a generated setup with an earlier one's env runs once under that name: said, since no row will carry it
    said = merged_notes(inp.setups) + [line for line in (warning, unjudged) if line]
    runs = plan_sweep(inp)
    if request.json and not request.dry_run:
        raise ConfigError("--json: only with --dry-run; allowed: --dry-run --json")
    if request.dry_run:
        from envmatrix.execution.hostinfo import host_facts

        host = host_facts(with_topology=False) if inp.hermetic else {}
        launches = dry_run(inp, runs, run_dir, os.environ, inp.probe_environment(os.environ, host), pins, len(gpus))
        for line in said:
            warn(line)
        return SweepPlan(inp, runs, run_dir, launches, inp.make_launcher().allocation_note)
    from envmatrix.reporting import build_matrix, write_reports
    from envmatrix.reporting.html import preload_renderer

    shaping = plan_shaping(inp, inp.make_launcher(), pins, len(gpus))  # refused here: nothing launched or written
    check_probe_runs(inp.probe, inp.make_launcher())
    # Only validated input starts the pool's servers: their torch imports (seconds) overlap opening the store
    # and the first runs' plans; bad input never starts (and kills) them. As many as the first run has ranks (a 2x1
    # run on one GPU waited for a second server started only once the session was open).
    first_world = runs[0].grid.world if runs else likely_ranks(os.environ)
    pool = WarmPool.prestart(os.environ, first_world) if request.pool else None
    try:
        run_dir = em_paths.run_dir(request.out, inp.name)
        with open_session(inp, run_dir, pins, len(gpus), lock_for=request.command_line,
                          pool=pool if pool is not None else request.pool, jobs=jobs) as session:
            for line in said:
                warn(line)
            # the report's imports overlap the runs instead of following them; matplotlib only for bench figures
            preload_renderer(with_figures=bool(inp.probe.params.get("bench")))
            session = shaping_session(session, shaping)
            _, results = run_sweep(inp, session, runs, rerun=request.rerun, listener=listener)
            stored = stored_cells(session.store)
    finally:
        if pool is not None:
            pool.close()
    # every report of the run directory shows the whole store (report.html draws it from `stored` too)
    shown_runs, shown = whole_store(runs, results, stored)
    matrix = build_matrix(shown_runs, shown, [g.label for g in inp.grids])
    title = f"envmatrix sweep {inp.name} ({inp.backend}, probe {inp.probe.name})"
    reports = write_reports(run_dir, matrix, shown, title)
    missed = []
    if inp.conditions:
        reports += write_condition_tables(run_dir, results, f"{title}: network conditions")
        missed = shaping_missed(results)
    outputs = write_run_outputs(run_dir, request.junit, f"envmatrix.sweep.{inp.name}", results, stored)
    return SweepResult(inp, runs, results, matrix, title, reports, outputs,
                       with_shaping_missed(sweep_exit_code(results), missed), missed)


def sweep_exit_code(results: list[ProbeResult]) -> int:
    """1 when a cell failed, 3 when the only non-passing cells are unresolved (probe skipped, exit 125), else 0."""
    outcomes = {r.outcome for r in results}
    if outcomes - {"pass", "unresolved"}:
        return EXIT_FAILURES
    return EXIT_INCONCLUSIVE if "unresolved" in outcomes else EXIT_OK


def sweep_id(inp: SweepInput, runs: list[Run]) -> str:
    canon = json.dumps(sorted(r.key for r in runs))
    return f"{inp.name}-{hashlib.sha256(canon.encode()).hexdigest()[:10]}"


DRY_RUN_PORT = 29500  # torch's default; a real run picks a free port when it launches


def plan_sweep(inp: SweepInput) -> list[Run]:
    return plan_runs(inp.setups, inp.grids, inp.probe, inp.backend, inp.launcher_key, inp.conditions or (None,))


def run_sweep(inp: SweepInput, session: Session, runs: list[Run], rerun: bool = False,
              listener: Listener | None = None) -> tuple[str, list[ProbeResult]]:
    """Run ``runs`` (the plan of ``inp``) in ``session``, each committed at once; their newest stored results."""
    sid = sweep_id(inp, runs)
    # its runs and their setups: a run reused from the store keeps the sweep_id (and setup name) it was stored under
    session.store.open_sweep(sid, {"config": inp.config, "conf_file": str(inp.conf_file), "runs": [r.key for r in runs],
                                   "setups": {r.key: r.setup.to_json() for r in runs}})
    run_trials(session.under(sweep_id=sid, judge=lambda result: judge(result, inp.expectations)), runs, rerun=rerun,
               listener=listener)
    # A stored result may come from another command (bisect, search) under another
    # name for the same env: report it under this sweep's setup names.
    by_key = {r.key: r for r in runs}
    results = session.store.latest(run_keys=list(by_key))
    for result in results:
        result.setup = by_key[result.run_key].setup.to_json()
        condition = by_key[result.run_key].network
        if condition is not None:  # likewise an unshaped run stored before, or under another condition name
            result.network = {**result.network, "name": condition.name, "value": condition.describe(),
                              "condition": condition.to_json()}
        # The current expect:/--baseline judge results stored by an earlier run too; a changed verdict is
        # stored as a new attempt of the same measurement, so every report read from the store agrees.
        before = result.outcome
        if judge(result, inp.expectations).outcome != before:
            session.store.put(result)
    return sid, results


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
        # the condition a run is shaped under: the launch alone does not show it (shaping is applied around it)
        network = {"network": {"name": run.network.name, "value": run.network.describe()}} if run.network else {}
        out.append({"index": i, "grid": run.grid.label, "setup": run.setup.name, **network, "run_key": run.key,
                    "launcher": inp.launcher, **plan_json(plan, base_env, workdir)})
    return out


