"""The HTML report's pure pieces on recorded H200 results: matrix cells, curves, best-so-far, the SVG figures."""

from __future__ import annotations

import copy

from conftest import REPO
from envmatrix.reporting import plots
from envmatrix.reporting.bench_tables import headline_bw
from envmatrix.app.report import load_results
from envmatrix.reporting.html_model import SearchModel, SearchTrial, best_so_far, build_curves, build_matrix_model

EXAMPLES = REPO / "reports" / "examples"
GPU_BENCH = REPO / "benchmarks" / "results" / "h200_fidelity" / "run2_2x2" / "envmatrix"


def test_matrix_cells_keep_outcome_root_cause_and_transport():
    results = load_results(str(EXAMPLES / "h200_mpirun"))
    model = build_matrix_model(results)
    assert model.grids == ["1x4", "2x2"] and len(model.setups) == 9
    cell = model.cells[("1x4", "baseline")]
    assert (cell.outcome, cell.line, cell.transport) == ("pass", "", "P2P/CUMEM")
    bad = model.cells[("2x2", "bad_plugin")]
    assert bad.outcome == "init_error" and "NET plugin" in bad.line
    svg = plots.matrix_heatmap(model)
    assert svg.startswith("<svg") and "P2P/CUMEM" in svg and "init_error" in svg and "(bad_plugin)" in svg


def test_curves_are_the_stored_busbw_out_of_place():
    (result,) = load_results(str(GPU_BENCH))
    with_in_place = copy.deepcopy(result)
    with_in_place.metrics += [{**m, "in_place": True, "busbw_gbps": 1.0} for m in result.metrics]
    curves = build_curves([with_in_place])
    assert set(curves) == {m["collective"] for m in result.metrics}
    for collective, (curve,) in curves.items():
        rows = sorted((m for m in result.metrics if m["collective"] == collective), key=lambda m: m["size_bytes"])
        assert curve.sizes == [m["size_bytes"] for m in rows]
        assert curve.busbw == [headline_bw(m) for m in rows] and curve.wrong == 0
    svg = plots.size_curves("allreduce", curves["allreduce"])
    assert "busbw (GB/s)" in svg and "time (us)" in svg and "(env) 2x2" in svg


def test_a_one_rank_bench_draws_its_zero_busbw_instead_of_failing():
    # busbw of a 1x1 grid is 0 at every size (nothing crosses a link): the report once failed on the log axis
    (result,) = load_results(str(GPU_BENCH))
    one_rank = copy.deepcopy(result)
    one_rank.metrics = [{**m, "busbw_gbps": 0.0} for m in one_rank.metrics]
    (curve,) = build_curves([one_rank])["allreduce"]
    assert set(curve.busbw) == {0.0} and all(t > 0 for t in curve.time_us)
    svg = plots.size_curves("allreduce", [curve])
    assert "all values are 0" in svg and "time (us)" in svg


def test_best_so_far_follows_the_direction():
    trials = [SearchTrial(0, "complete", 5.0, {}), SearchTrial(1, "fail", None, {}, "init_error: x"),
              SearchTrial(2, "complete", 7.0, {}), SearchTrial(3, "complete", 6.0, {})]
    assert best_so_far(trials, "maximize") == [(0, 5.0), (2, 7.0), (3, 7.0)]
    assert best_so_far(trials, "minimize") == [(0, 5.0), (2, 5.0), (3, 5.0)]
    model = SearchModel("s", "busbw", "maximize", ["NCCL_ALGO"], [
        SearchTrial(0, "complete", 5.0, {"NCCL_ALGO": "Ring"}), SearchTrial(1, "complete", 7.0, {"NCCL_ALGO": None})], [])
    svg = plots.search_parallel(model)
    assert "Ring" in svg and "unset" in svg and "ALGO" in svg


def test_a_search_whose_every_trial_search_screen_stopped_renders_without_its_measured_plots():
    # search.screen's stopped trials are PRUNED with an estimate as their value: the parallel plot took any trial with
    # a value and failed on no completed one (report.html: "ValueError: min() arg is an empty sequence", CI run 110)
    from envmatrix.reporting.html import render_html
    from envmatrix.reporting.html_model import RunData

    stopped = [SearchTrial(n, "pruned", 0.4 + n / 10, {"TORCH_DISTRIBUTED_DEBUG": v}) for n, v in enumerate(["OFF", "INFO"])]
    model = SearchModel("s", "busbw", "maximize", ["TORCH_DISTRIBUTED_DEBUG"], stopped, [])
    assert best_so_far(stopped, "maximize") == []
    page = render_html(RunData("/tmp/none", search=model), "search s")
    assert "search s" in page
    one = [*stopped, SearchTrial(2, "complete", 0.9, {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})]
    svg = plots.search_parallel(SearchModel("s", "busbw", "maximize", ["TORCH_DISTRIBUTED_DEBUG"], one, []))
    assert "DETAIL" in svg and "INFO" not in svg  # the stopped trials' estimates are not drawn as measured
