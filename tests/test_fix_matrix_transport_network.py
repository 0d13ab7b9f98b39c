"""matrix.md's transport table under a network axis: it was keyed (grid, setup name) while the matrix's columns are
(setup @ condition), so every cell of a sweep with a `network:` axis read '-' although NCCL's log named a transport;
and the algorithm table named the setup without its condition, two identical-looking rows per setup."""

from envmatrix.env.atoms import Atom, Setup
from envmatrix.network.conditions import parse_condition
from envmatrix.planning.grid import parse_grid
from envmatrix.planning.plan import ProbeSpec, plan_runs
from envmatrix.reporting.formats import render_markdown
from envmatrix.reporting.matrix import build_matrix
from envmatrix.results import ProbeResult


def test_transport_and_algorithm_rows_are_per_condition():
    conditions = [parse_condition("fast", "rate=10gbit", "test"), parse_condition("slow", "rate=1gbit", "test")]
    runs = plan_runs([Setup("base", (Atom("NCCL_DEBUG", value="INFO"),))], [parse_grid("2x1")], ProbeSpec("allreduce"),
                     "nccl", "local", conditions)
    transports = {"fast": "NET/Socket", "slow": "NET/IB"}
    results = [ProbeResult(r.key, r.setup.to_json(), r.grid.label, r.probe.to_json(), "nccl", "local", "pass",
                           nccl={"transport": transports[r.network.name],
                                 "algorithms": {"AllReduce": {"RING/SIMPLE": 12}}},
                           network={"name": r.network.name, "value": r.network.describe()}) for r in runs]
    md = render_markdown(build_matrix(runs, results), results, "t")
    table = md.split("## Transport per cell")[1]
    assert "| 2x1 | NET/Socket | NET/IB |" in table, table
    algorithms = md.split("## Algorithm and protocol")[1]
    assert "(base @ fast)" in algorithms and "(base @ slow)" in algorithms, algorithms


def test_busbw_table_and_curves_keep_each_condition_apart():
    from envmatrix.reporting.bench_tables import busbw_by_setup
    from envmatrix.reporting.html_model import build_curves

    conditions = [parse_condition("fast", "rate=10gbit", "test"), parse_condition("slow", "rate=1gbit", "test")]
    runs = plan_runs([Setup("base", (Atom("NCCL_DEBUG", value="INFO"),))], [parse_grid("2x1")], ProbeSpec("bench"),
                     "nccl", "local", conditions)
    busbw = {"fast": 1.2, "slow": 0.12}
    results = [ProbeResult(r.key, r.setup.to_json(), r.grid.label, r.probe.to_json(), "nccl", "local", "pass",
                           network={"name": r.network.name, "value": r.network.describe()},
                           metrics=[{"collective": "allreduce", "size_bytes": 1 << 20, "busbw_gbps": busbw[r.network.name],
                                     "algbw_gbps": busbw[r.network.name], "time_us": 1.0, "wrong": 0}]) for r in runs]
    header, rows = busbw_by_setup(results, "2x1")
    assert header == ["busbw (GB/s)", "(base @ fast)", "(base @ slow)"] and len(rows[0]) == 3, (header, rows)
    assert [c.label for c in build_curves(results)["allreduce"]] == ["(base @ fast) 2x1", "(base @ slow) 2x1"]
