"""matrix.md and results.json show the whole store, as report.html does (issue 39 point 5): a second sweep into
the same run directory keeps the first sweep's cells in every report."""

import json

import pytest

from conftest import write_conf

pytestmark = pytest.mark.slow


def test_a_second_sweep_keeps_the_first_sweeps_cells_in_matrix_md_and_results_json(cli, tmp_path):
    out = tmp_path / "o"
    first = write_conf(tmp_path / "first.yaml", "name: same\nbackend: gloo\ngrids: [1x1]\nsetups:\n  a: {}\n"
                       "probe: {timeout_s: 30, collectives: [allreduce]}\n")
    second = write_conf(tmp_path / "second.yaml", "name: same\nbackend: gloo\ngrids: [1x2]\nsetups:\n  b: {ENVMATRIX_X: '1'}\n"
                        "probe: {timeout_s: 30, collectives: [allreduce]}\n")
    assert cli.run("sweep", f"conf={first}", "--out", str(out)).returncode == 0
    done = cli.run("sweep", f"conf={second}", "--out", str(out), "--allow-unknown-vars")
    assert done.returncode == 0, done.stdout + done.stderr
    matrix = (out / "matrix.md").read_text()
    assert "| grid | (b) | (a) |" in matrix and "| 1x2 | 1 | - |" in matrix and "| 1x1 | - | 1 |" in matrix
    stored = json.loads((out / "results.json").read_text())
    assert sorted((r["setup"]["name"], r["grid"]) for r in stored["results"]) == [("a", "1x1"), ("b", "1x2")]
    html = (out / "report.html").read_text()
    assert "(a)" in html and "(b)" in html
