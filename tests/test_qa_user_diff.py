"""envmatrix diff as an upgrade gate (a new user's QA pass): a busbw point of run A that a passing run B never
measured was not compared, so the gate cannot pass it (exit 3), as a cell run B lacks.

Found with two real 1x2 gloo sweeps: run A with probe.bench, run B without; diff said 'no regression', exit 0,
with 0 points compared. The runs here are the recorded real 2x2 NCCL bench test_diff uses.
"""

from __future__ import annotations

import copy
import json

from test_diff import GPU_BENCH, gpu_result

from envmatrix.cli import main
from envmatrix.judgement.regressions import diff_runs
from envmatrix.reporting.diff import diff_text


def without_points(result, keep):
    out = copy.deepcopy(result)
    out.metrics = [m for m in out.metrics if keep(m)]
    return out


def test_run_b_without_run_a_busbw_points_is_inconclusive_not_a_pass():
    a = gpu_result()
    d = diff_runs([a], [without_points(a, lambda m: False)], 5.0)
    assert not d.regressed and d.compared_cells == 1 and d.compared_points == 0
    assert d.inconclusive and d.unmeasured, "run B measured no busbw point of run A, yet the gate passed"
    text = diff_text(d, "a", "b")
    assert "INCONCLUSIVE" in text and f"did not measure {len(d.unmeasured)} of run A's busbw points" in text
    assert json.loads(json.dumps(d.to_json()))["busbw_points_missing_in_b"][0][:3] == [a.setup_name, a.grid, a.backend]


def test_one_missing_size_is_named_and_the_rest_still_compared():
    a = gpu_result()
    biggest = max(m["size_bytes"] for m in a.metrics if m["collective"] == "allreduce")
    d = diff_runs([a], [without_points(a, lambda m: not (m["collective"] == "allreduce"
                                                         and m["size_bytes"] == biggest))], 5.0)
    assert [(p[3], p[4]) for p in d.unmeasured] == [("allreduce", biggest)]
    assert d.compared_points > 0 and d.inconclusive
    assert f"allreduce {biggest} B" in diff_text(d, "a", "b")


def test_same_points_pass_and_a_failed_run_b_is_a_regression_not_unmeasured():
    a = gpu_result()
    same = diff_runs([a], [a], 5.0)
    assert not same.inconclusive and not same.unmeasured and not same.regressed
    broken = copy.deepcopy(a)
    broken.outcome, broken.root_cause, broken.metrics = "init_error", {"line": "boom"}, []
    d = diff_runs([a], [broken], 5.0)
    assert d.regressed and not d.unmeasured


def test_cli_exit_is_0_on_the_same_recorded_run(capsys):
    assert main(["diff", str(GPU_BENCH), str(GPU_BENCH)]) == 0
    assert "no regression" in capsys.readouterr().out
