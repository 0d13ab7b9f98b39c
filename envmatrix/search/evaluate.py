"""A trial = one probe (+ bench) of a setup on each chosen grid, through the engine's ``run_trial``.

Every ProbeResult is committed to the run directory's result store (as a
sweep does), under the sweep id ``search-<study name>``; the trial gets the
store references, a compact busbw table per grid and the per-grid objective
values as user attributes. The first failing grid ends the trial: its
failure class and root-cause line become the trial's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from envmatrix.env.atoms import Setup
from envmatrix.planning.grid import Grid
from envmatrix.search.fidelity import FIDELITY_ATTR, fidelity_of
from envmatrix.search.objective import EvalOutcome, MissingMetric, Objective, compact_metrics, evaluate

NO_METRIC = "no_metric"
# A trial whose ranks shared GPUs (emulated hosts): its bandwidth says nothing about the setup, so no objective reads it.
SHARED_GPU_FIGURES = "shared_gpu_figures"


@dataclass
class ProbeEvaluator:
    session: Any  # engine.Session; its sweep_id is ``search-<study name>``
    grids: Sequence[Grid]
    objectives: Sequence[Objective]
    allow_shared_gpu_figures: bool = False  # search.allow_shared_gpu_figures: the user takes shared-GPU busbw as is
    cheap: Optional["ProbeEvaluator"] = None  # the same trial at search.screen's cheap fidelity (search.study.measure)
    label_suffix: str = ""  # the cheap twin's trials are tNNNN-screen in the run directory

    def measure(self, label: str, setup: Setup) -> EvalOutcome:
        from envmatrix.engine import run_trial

        refs, metrics, compact, shared = [], {}, {}, []
        for grid in self.grids:
            # every measurement is a fresh launch: confirmation rounds re-measure the same env on purpose
            trial = run_trial(self.session, setup, grid, reuse=False, label=label)
            result = trial.result
            refs.append({"grid": grid.label, "run_key": result.run_key, "attempt": trial.attempt})
            if not result.passed:
                line = (result.root_cause or {}).get("line") or result.outcome
                return EvalOutcome(None, result.outcome, f"{grid.label}: {line}", {"results": refs})
            if result.shared_gpu and not self.allow_shared_gpu_figures:
                return EvalOutcome(None, SHARED_GPU_FIGURES, f"{grid.label}: passed, but its ranks shared GPUs "
                                   f"({result.placement.get('label')}): bandwidth not representative, so no objective "
                                   "value; allowed: search.allow_shared_gpu_figures: true", {"results": refs})
            if result.shared_gpu:
                shared.append(grid.label)
            metrics[grid.label] = result.metrics
            compact[grid.label] = compact_metrics(result.metrics)
        attrs: dict[str, Any] = {"results": refs, "metrics": compact}
        if shared:  # asked for: the figures count, and every table and export built from them says so
            attrs["shared_gpu"] = shared
        try:
            values = [evaluate(o, metrics) for o in self.objectives]
            attrs[FIDELITY_ATTR] = fidelity_of(self.objectives[0], metrics)  # what the values were read from
            attrs["per_grid"] = {
                g: [_safe_eval(o, {g: rows}) for o in self.objectives] for g, rows in metrics.items()
            }
        except MissingMetric as exc:
            return EvalOutcome(None, NO_METRIC, str(exc), attrs)
        return EvalOutcome(values, attrs=attrs)

    def __call__(self, number: int, setup: Setup) -> EvalOutcome:
        return self.measure(f"t{number:04d}{self.label_suffix}", setup)

    def screened(self, screen: Any) -> "ProbeEvaluator":
        """This evaluator with a cheap twin (search.screen.Screen): the probe's bench cut down, the objective read at
        the largest size that bench measures. Its results go to the same store under their own run keys."""
        from envmatrix.planning.plan import ProbeSpec
        from envmatrix.search.screen import cheap_bench, cheap_objective

        spec = self.session.probe_spec
        params = {**spec.params, "bench": cheap_bench(spec.params["bench"], screen)}
        twin = ProbeEvaluator(self.session.under(probe_spec=ProbeSpec.make(spec.name, params)), self.grids,
                              [cheap_objective(o) for o in self.objectives], self.allow_shared_gpu_figures, label_suffix="-screen")
        return ProbeEvaluator(self.session, self.grids, self.objectives, self.allow_shared_gpu_figures, cheap=twin)


def _safe_eval(objective: Objective, metrics: Mapping[str, Any]) -> Any:
    try:
        return evaluate(objective, metrics)
    except MissingMetric:
        return None  # an objective restricted to other grids
