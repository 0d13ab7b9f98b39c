"""``envmatrix search``'s lifecycle: the best-busbw env by Optuna ask/tell.

Optuna is imported only inside a search (and export), so ``envmatrix sweep``/``bench`` never pay for it; the driver
imports torch only for ``search.sampler=gp`` (Optuna's GPSampler needs it).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from envmatrix import paths as em_paths
from envmatrix import values
from envmatrix.app.inputs import allows_ignored, check_probe_runs, prepare
from envmatrix.app.outputs import RunOutputs, write_run_outputs
from envmatrix.app.report import stored_cells
from envmatrix.errors import EXIT_INCONCLUSIVE, ConfigError, EnvmatrixError, require


@dataclass(frozen=True)
class SearchRequest:
    overrides: tuple[str, ...] = ()
    trials: Optional[int] = None  # the same as search.trials=N
    out: Optional[str] = None
    dry_run: bool = False
    allow_unknown_vars: bool = False
    allow_ignored_vars: bool = False


@dataclass(frozen=True)
class SearchPlan:
    """The resolved search: config input, settings, space and objectives (a dry run ends here)."""

    inp: Any
    settings: Any  # search.study.SearchSettings
    space: Any  # search.space.SearchSpace
    objectives: list
    gpus: list
    pins: dict


@dataclass(frozen=True)
class SearchResult:
    plan: SearchPlan
    report: Any  # search.summary.SearchReport
    markdown: str  # RUN_DIR/search.md
    storage: str  # the study's storage URL without its password
    store_path: str
    confirmed: Optional[dict]  # the confirm rounds' verdict (search.confirm.to_json), when they ran
    aborted: Optional[Exception]  # search.study.SearchAborted: raised by the command once the report is out
    outputs: RunOutputs


@dataclass(frozen=True)
class SearchEvents:
    """What happens while a search runs, for the command line to show (each default shows nothing)."""

    line: Callable[[str], None] = lambda text: None  # a progress line: start, baseline, stop, confirm
    trial: Optional[Callable[[str, Any, Any], None]] = None  # search.study's listener: (event, trial, outcome)
    warn: Callable[[str], None] = lambda text: None  # searched variables the backend never reads


def plan_search(request: SearchRequest) -> SearchPlan:
    from envmatrix.config.compose import overrides_blamed
    from envmatrix.search.objective import check_measured, parse_objectives
    from envmatrix.search.screen import parse_screen
    from envmatrix.search.space import parse_search_space
    from envmatrix.search.study import parse_settings

    inp, gpus, pins, catalog = prepare(request.overrides, request.allow_unknown_vars, search=True)
    search = dict(inp.config.get("search") or {})
    if request.trials is not None:
        given = [o for o in request.overrides if o.lstrip("+").startswith("search.trials=")]
        if given:
            raise ConfigError(f"--trials {request.trials}: given with {given[0]}, two answers to one question; "
                              "allowed: one of them")
        search["trials"] = values.integer("--trials", request.trials, minimum=1)
    where = f"{inp.conf_file.name}: search"
    with overrides_blamed(inp.conf_file, request.overrides):
        settings = parse_settings(search, where, inp.name, inp.seed)
        space = parse_search_space(search, catalog, pins, where, allow_unknown=request.allow_unknown_vars)
        objectives = parse_objectives(search.get("objective"), f"{where}.objective", [g.label for g in inp.grids])
        check_measured(objectives, inp.probe.params.get("bench"), f"{where}.objective", [g.label for g in inp.grids])
        screen = parse_screen(search.get("screen"), f"{where}.screen", len(objectives), settings.baseline,
                              inp.probe.params.get("bench"))
    settings = replace(settings, screen=screen)
    check_shared_gpu_figures(inp, settings, len(gpus), where)
    return SearchPlan(inp, settings, space, objectives, gpus, pins)


def check_shared_gpu_figures(inp: Any, settings: Any, gpus: int, where: str) -> None:
    """A search ranks setups by busbw; ranks sharing a GPU (emulated hosts) measure the GPU's split, not the setup:
    refused before any trial (exit 2) unless search.allow_shared_gpu_figures says to take them as they are."""
    from envmatrix.planning.placement import place

    emulates = inp.make_launcher().emulates_hosts
    shared = [g.label for g in inp.grids if place(g, inp.backend, gpus, emulates).shared]
    if shared and not settings.allow_shared_gpu_figures:
        raise ConfigError(f"{where}: grids {', '.join(shared)} would share GPUs as emulated hosts, whose busbw is not "
                          "representative of the setups; allowed: grids of at most one rank per GPU, or "
                          "search.allow_shared_gpu_figures=true to rank by those figures anyway")


def search(request: SearchRequest, events: SearchEvents = SearchEvents()) -> SearchPlan | SearchResult:
    from envmatrix.catalog.backends import check_varied

    plan = plan_search(request)
    inp, settings, space, objectives = plan.inp, plan.settings, plan.space, plan.objectives
    # a search over variables the backend never reads would crown noise (issue 22): refused, or one warning line
    warning = check_varied(inp.backend, space.vars, "search", allow=allows_ignored(inp, request.allow_ignored_vars),
                           probe=inp.probe.name)
    if warning:
        events.warn(warning)
    if request.dry_run:
        return plan
    check_probe_runs(inp.probe, inp.make_launcher())
    optuna = require("optuna", "search", "envmatrix search")

    from envmatrix.engine import open_session
    from envmatrix.search.evaluate import ProbeEvaluator
    from envmatrix.search.summary import build_report, render_markdown
    from envmatrix.search.study import (STOPPED_ATTR, SearchAborted, make_sampler, make_storage, open_study, redact,
                                       run_search)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    run_dir = em_paths.run_dir(request.out, inp.name, create=False)
    url = settings.storage or f"sqlite:///{os.path.join(run_dir, 'study.sqlite')}"
    # a storage of the user's is opened before the run directory exists: a bad URL leaves nothing behind
    storage = make_storage(url) if settings.storage else None
    run_dir = em_paths.run_dir(request.out, inp.name)
    storage = storage or make_storage(url)
    sampler = make_sampler(settings.sampler, settings.seed, len(space.allowed_rows()), space)
    grids = [g.label for g in inp.grids]
    meta = {"space": space.to_json(), "objectives": [o.to_json() for o in objectives], "grids": grids,
            "backend": inp.backend, "probe": inp.probe.to_json(), "conf_file": str(inp.conf_file)}
    study = open_study(storage, settings.study_name, [o.direction for o in objectives], sampler, meta)
    sweep_id = f"search-{settings.study_name}"
    events.line(f"search {settings.study_name}: {len(space.allowed_rows())} allowed combinations of {', '.join(space.vars)}; "
                f"trials={settings.trials}, sampler {settings.sampler} (seed {settings.seed}), grids {', '.join(grids)}; "
                f"storage {redact(url)}" + (f"; screen: {settings.screen.describe()}" if settings.screen else ""))
    aborted, confirmed = None, None
    with open_session(inp, run_dir, plan.pins, len(plan.gpus), sweep_id=sweep_id, pool=True) as session:
        session.store.open_sweep(sweep_id, {"config": inp.config, "conf_file": str(inp.conf_file), "study": settings.study_name})
        evaluator = ProbeEvaluator(session, inp.grids, objectives, settings.allow_shared_gpu_figures)
        if settings.screen is not None:
            evaluator = evaluator.screened(settings.screen)
        measure_baseline(study, evaluator, settings, grids, events)
        try:
            deadline = None
            if settings.budget_s is not None:  # one window for the fleet: a later worker does not outlast its peers
                from envmatrix.search.fleet import budget_window
                from envmatrix.search.study import Worker

                deadline = budget_window(study, settings.budget_s, Worker.me(), settings.heartbeat_grace_s)
            stats = run_search(study, space, objectives, evaluator, settings, listener=events.trial, deadline=deadline)
            events.line(f"stopped: {stats.stop_reason}; this worker probed {stats.probed}, reused {stats.cached}, "
                        f"skipped {stats.forbidden} forbidden samples, recovered {len(stats.recovered)} stale trials")
        except SearchAborted as exc:
            aborted = exc
        # export says why the study has no confirmation, and that its best is inconclusive
        study.set_user_attr(STOPPED_ATTR, None if aborted is None else str(aborted))
        # asked again: a claimer that died after this worker deferred to it measured nothing, and no later worker may come
        measure_baseline(study, evaluator, settings, grids, events)
        if aborted is None and settings.confirm_top_k:
            from envmatrix.app.search_confirm import confirm_once

            confirmed = confirm_once(study, space, objectives, evaluator, settings, events.line)
        if session.pool is not None:  # every trial's ranks come from the session's one warm pool (sweep's and bench's)
            started = session.pool.started
            events.line(f"warm pool: {started['pooled']} ranks forked from warm servers, {started['cold']} started cold"
                        + (" (a command probe's processes, or ranks under other loader variables, start cold)" if started["cold"] else ""))
        stored = stored_cells(session.store)  # the page's cells, as `envmatrix report` reads them
    report = build_report(study, settings.top_k, storage_hint=redact(url))
    md = os.path.join(run_dir, "search.md")
    aborted = aborted or nothing_completed(study)
    with open(md, "w") as fh:
        fh.write(render_markdown(report))
    return SearchResult(plan, report, md, redact(url), os.path.join(run_dir, em_paths.STORE_FILE), confirmed, aborted,
                        write_run_outputs(run_dir, stored=stored))


class NothingMeasured(EnvmatrixError):
    """A search that ends with no finished trial in its study: inconclusive."""

    exit_code = EXIT_INCONCLUSIVE


def nothing_completed(study: Any) -> Optional[Exception]:
    """A study whose every trial failed found nothing to export: exit 1 (failures found), as a search stopped by
    search.max_failure_rate does, however few trials it held (that limit waits for 3); one that holds no finished
    trial at all: exit 3 (inconclusive)."""
    from collections import Counter

    from optuna.trial import TrialState

    from envmatrix.search.study import SearchAborted, screened_count

    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
    screened = screened_count(study)
    if not trials and screened:  # nothing reached the full bench, so nothing was measured against the default there
        return NothingMeasured(f"search: study {study.study_name!r}: all {screened} trials stopped at search.screen's "
                               "cheap fidelity, below keep of the best cheap value (the default env's included), so no "
                               "config was measured at the full one; allowed: a lower search.screen.keep, or more trials")
    if not trials:  # search.budget_s closed before a first trial: nothing failed, nothing found
        return NothingMeasured(f"search: study {study.study_name!r} holds no finished trial (a search.budget_s that "
                               "closed before the first one ended, or only forbidden samples); nothing to export")
    if any(t.state == TrialState.COMPLETE for t in trials):
        return None
    classes = Counter(str(t.user_attrs.get("failure_class", "unknown")) for t in trials)
    last = trials[-1].user_attrs.get("root_cause") or ""
    return SearchAborted(f"search: none of the {len(trials)} trials of study {study.study_name!r} completed "
                         f"({', '.join(f'{n} {c}' for c, n in classes.most_common())}; last: {last[:160]}); nothing to export")


def measure_baseline(study: Any, evaluator: Any, settings: Any, grids: list[str], events: SearchEvents) -> None:
    """The default env (empty setup) once per study, by the worker that claims it (app.search_confirm.once_per_study),
    kept in the study for the report's comparison. Asked before and after the trials: nothing the second time once it
    is stored, a take-over when its claimer died."""
    from envmatrix.app.search_confirm import once_per_study
    from envmatrix.env.atoms import Setup
    from envmatrix.search.fleet import BASELINE_JOB
    from envmatrix.search.screen import SCREEN_ATTR
    from envmatrix.search.study import BASELINE_ATTR

    if not settings.baseline or BASELINE_ATTR in study.user_attrs:
        return

    def work(worker: Any) -> dict:
        events.line("baseline: the default env (empty setup) on " + ", ".join(grids))
        out = evaluator.measure("baseline", Setup("default", (), origin="baseline"))
        check = cost_check(evaluator, settings.screen, events) if settings.screen is not None and not out.failed else None
        return {"values": out.values, "per_grid": out.attrs.get("per_grid"), "failed": out.failed,
                "failure_class": out.failure_class, "root_cause": out.root_cause, "metrics": out.attrs.get("metrics"),
                SCREEN_ATTR: None if check is None else check.to_json()}

    once_per_study(study, BASELINE_JOB, settings, events.line, "baseline",
                   "the report compares the best trial with it once it is in the study", work)


def cost_check(evaluator: Any, screen: Any, events: SearchEvents) -> Any:
    """The default env's probe at the cheap fidelity, then at the full one, each timed (the baseline before them
    started the warm pool): search.screen.CostCheck, or None when either failed (no screening then)."""
    from envmatrix.env.atoms import Setup
    from envmatrix.search.screen import CostCheck

    setup = Setup("default", (), origin="baseline")
    started = time.monotonic()
    cheap = evaluator.cheap.measure("baseline-screen", setup)
    middle = time.monotonic()
    full = evaluator.measure("baseline-full", setup)
    ended = time.monotonic()
    if cheap.failed or full.failed:
        events.line(f"screen off: the default env failed at the {'cheap' if cheap.failed else 'full'} fidelity "
                    f"({(cheap if cheap.failed else full).root_cause}); every trial runs the full bench")
        return None
    check = CostCheck(middle - started, ended - middle, screen.pays_below, cheap.values[0], full.values[0],
                      str(cheap.attrs.get("fidelity") or ""))
    events.line(check.line())
    return check
