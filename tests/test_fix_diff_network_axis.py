"""diff under a network axis compares each condition's cell on its own: cells were keyed (setup, grid, backend), so
the conditions of one setup collapsed into one cell, the last stored won, and a regression under the other condition
was never compared (a run slowed only at 1 Gbit against an unchanged 200 Mbit one read 'no regression', exit 0)."""

import copy

from envmatrix.judgement.regressions import diff_runs
from test_diff import gpu_result, slowed


def under(result, name: str):
    out = copy.deepcopy(result)
    out.network = {"name": name, "value": f"rate={name}"}
    return out


def test_each_condition_is_its_own_cell():
    base = gpu_result()
    size = max(m["size_bytes"] for m in base.metrics if m["collective"] == "allreduce")
    a = [under(base, "b1g"), under(base, "b200m")]
    b = [under(slowed(base, "allreduce", size, 0.5), "b1g"), under(base, "b200m")]
    d = diff_runs(a, b, 5.0)
    assert d.compared_cells == 2 and d.regressed
    assert {c.setup for c in d.slower} == {f"{base.setup_name} @ b1g"}
    # the same results with no network axis keep the plain setup name
    assert diff_runs([base], [base], 5.0).compared_cells == 1 and base.column == base.setup_name
