"""A trial = one probe (+ bench) of a setup on each chosen grid, through ``execute()``.

Every ProbeResult is committed to the run directory's result store (as a
sweep does), under the sweep id ``search-<study name>``; the trial gets the
store references, a compact busbw table per grid and the per-grid objective
values as user attributes. The first failing grid ends the trial: its
failure class and root-cause line become the trial's.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from envmatrix.env.atoms import Setup
from envmatrix.planning.grid import Grid
from envmatrix.planning.plan import ProbeSpec, Run, run_key
from envmatrix.search.objective import EvalOutcome, MissingMetric, Objective, compact_metrics, evaluate

NO_METRIC = "no_metric"


@dataclass
class ProbeEvaluator:
    grids: Sequence[Grid]
    probe_spec: ProbeSpec
    backend: str
    launcher_key: str  # the launcher's identity in run keys (SweepInput.launcher_key)
    objectives: Sequence[Objective]
    store: Any
    run_dir: str
    sweep_id: str
    inherited_env: Mapping[str, str]
    pins: Mapping[str, str]
    gpus: int
    host: dict
    launcher: Any  # a configured Launcher (SweepInput.make_launcher): options, hosts, allocation checks

    def __post_init__(self) -> None:
        from envmatrix.probes import get_probe

        self.probe = get_probe(self.probe_spec.name)

    def measure(self, label: str, setup: Setup) -> EvalOutcome:
        from envmatrix.execution.runner import execute

        refs, metrics, compact = [], {}, {}
        for grid in self.grids:
            run = Run(run_key(setup, grid, self.probe_spec, self.backend, self.launcher_key), setup, grid,
                      self.probe_spec, self.backend, self.launcher_key)
            stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**9:09d}"
            workdir = os.path.join(self.run_dir, "logs", f"{label}_{grid.label}_{run.key}", stamp)
            result = execute(run, self.launcher, self.probe, workdir, self.inherited_env, self.pins, self.gpus)
            result.sweep_id, result.host = self.sweep_id, self.host
            attempt = self.store.put(result)
            refs.append({"grid": grid.label, "run_key": run.key, "attempt": attempt})
            if not result.passed:
                line = (result.root_cause or {}).get("line") or result.outcome
                return EvalOutcome(None, result.outcome, f"{grid.label}: {line}", {"results": refs})
            metrics[grid.label] = result.metrics
            compact[grid.label] = compact_metrics(result.metrics)
        attrs: dict[str, Any] = {"results": refs, "metrics": compact}
        try:
            values = [evaluate(o, metrics) for o in self.objectives]
            attrs["per_grid"] = {
                g: [_safe_eval(o, {g: rows}) for o in self.objectives] for g, rows in metrics.items()
            }
        except MissingMetric as exc:
            return EvalOutcome(None, NO_METRIC, str(exc), attrs)
        return EvalOutcome(values, attrs=attrs)

    def __call__(self, number: int, setup: Setup) -> EvalOutcome:
        return self.measure(f"t{number:04d}", setup)


def _safe_eval(objective: Objective, metrics: Mapping[str, Any]) -> Any:
    try:
        return evaluate(objective, metrics)
    except MissingMetric:
        return None  # an objective restricted to other grids
