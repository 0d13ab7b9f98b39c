"""The report-format contract: every registered format renders every outcome class, its root cause, and unrun cells."""

from __future__ import annotations

import json

import pytest

from envmatrix.env import Atom, Setup
from envmatrix.planning import Grid, ProbeSpec, plan_runs
from envmatrix.reporting import build_matrix, format_names, get_format, write_reports
from envmatrix.results import OUTCOMES, PASS, PEER_KILLED, ProbeResult, RankResult

CLASSES = (*OUTCOMES, PEER_KILLED)  # peer_killed is a rank outcome, but a rendered result may still carry it
NOT_RUN = "never_ran"


def _matrix_and_results():
    setups = [Setup(f"s_{outcome}", (Atom("NCCL_ALGO", value=outcome),)) for outcome in CLASSES] + [Setup(NOT_RUN)]
    runs = plan_runs(setups, [Grid(1, 2)], ProbeSpec.make("builtin", {}), "gloo", "local")
    results = []
    for run in runs[:-1]:
        outcome = run.setup.name[2:]
        failed = outcome != PASS
        results.append(ProbeResult(
            run_key=run.key, setup=run.setup.to_json(), grid=run.grid.label, probe={"name": "builtin", "params": {}},
            backend="gloo", launcher="local", outcome=outcome,
            root_cause={"rank": 1, "outcome": outcome, "line": f"root cause of {outcome}"} if failed else {},
            ranks=[RankResult(rank=r, outcome=outcome if (failed and r == 1) else PASS) for r in range(2)],
            started_at=1.0, finished_at=2.0,
        ))
    return build_matrix(runs, results, ["1x2"]), results


@pytest.mark.parametrize("name", format_names())
def test_renders_every_outcome_class(name):
    matrix, results = _matrix_and_results()
    text = get_format(name).render(matrix, results, "contract")
    for outcome in CLASSES:
        assert f"s_{outcome}" in text, f"{name}: setup with outcome {outcome} missing"
        if outcome != PASS:
            assert f"root cause of {outcome}" in text, f"{name}: root cause of {outcome} missing"
    assert NOT_RUN in text  # an unrun cell is shown, not dropped


@pytest.mark.parametrize("name", format_names())
def test_rendering_is_deterministic(name):
    matrix, results = _matrix_and_results()
    render = get_format(name).render
    assert render(matrix, results, "t") == render(*_matrix_and_results(), "t")


def test_json_round_trips_every_result():
    matrix, results = _matrix_and_results()
    payload = json.loads(get_format("json").render(matrix, results, "t"))
    assert [ProbeResult.from_json(r) for r in payload["results"]] == results


def test_write_reports_writes_one_file_per_format_atomically(tmp_path):
    matrix, results = _matrix_and_results()
    paths = write_reports(str(tmp_path), matrix, results, "t")
    assert sorted(p.split("/")[-1] for p in paths) == sorted(get_format(n).filename for n in format_names())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.split("/")[-1] for p in paths)  # no .tmp left
