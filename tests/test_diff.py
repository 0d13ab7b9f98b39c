"""envmatrix diff: pass<->fail flips with the error line, busbw drops beyond the threshold, exit 1 only on regression."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

from conftest import REPO, write_conf
from envmatrix.errors import ConfigError
from envmatrix.app.report import load_results
from envmatrix.judgement.regressions import diff_runs, parse_threshold
from envmatrix.store.sqlite import SqliteStore

GPU_BENCH = REPO / "benchmarks" / "results" / "h200_fidelity" / "run2_2x2" / "envmatrix"  # a real 2x2 NCCL bench on H200s


def gpu_result():
    (result,) = load_results(str(GPU_BENCH))
    assert result.passed and len(result.metrics) >= 6
    return result


def slowed(result, collective: str, size: int, factor: float):
    out = copy.deepcopy(result)
    for m in out.metrics:
        if m["collective"] == collective and m["size_bytes"] == size:
            m["busbw_gbps"] *= factor
            m["algbw_gbps"] *= factor
    return out


def failed(result, line: str):
    out = copy.deepcopy(result)
    out.outcome, out.root_cause, out.metrics = "init_error", {"rank": 1, "outcome": "init_error", "line": line}, []
    return out


def test_threshold_forms():
    assert parse_threshold("5%") == 5.0 and parse_threshold("5") == 5.0 and parse_threshold("0.05") == pytest.approx(5.0)
    assert parse_threshold("12.5%") == 12.5 and parse_threshold("0%") == 0.0
    for bad in ("lots", "150%", "-3%"):
        with pytest.raises(ConfigError, match="--busbw-drop"):
            parse_threshold(bad)


def test_busbw_drop_beyond_threshold_only():
    a = gpu_result()
    m = max((m for m in a.metrics if m["collective"] == "allreduce"), key=lambda m: m["size_bytes"])
    size = m["size_bytes"]
    d = diff_runs([a], [slowed(a, "allreduce", size, 0.90)], 5.0)
    assert [(c.collective, c.size_bytes) for c in d.slower] == [("allreduce", size)]
    assert d.slower[0].change_pct == pytest.approx(-10.0) and d.regressed
    assert d.compared_points == len({(m["collective"], m["size_bytes"]) for m in a.metrics if not m.get("in_place")})
    assert not diff_runs([a], [slowed(a, "allreduce", size, 0.97)], 5.0).regressed  # inside the noise allowance
    assert not diff_runs([a], [slowed(a, "allreduce", size, 1.30)], 5.0).regressed  # faster is never a regression
    assert diff_runs([a], [slowed(a, "allreduce", size, 0.97)], 2.0).regressed


def test_flips_carry_the_error_line():
    a = gpu_result()
    broken = failed(a, "Failed to initialize any NET plugin")
    d = diff_runs([a], [broken], 5.0)
    assert d.regressed and [(f.before, f.after, f.line) for f in d.broke] == [("pass", "init_error", "Failed to initialize any NET plugin")]
    back = diff_runs([broken], [a], 5.0)
    assert not back.regressed and [f.line for f in back.fixed] == ["Failed to initialize any NET plugin"]
    other = failed(a, "timeout")
    other.outcome = "timeout"
    assert diff_runs([broken], [other], 5.0).changed_failure and not diff_runs([broken], [other], 5.0).regressed


def test_a_cell_of_run_a_missing_from_run_b_is_inconclusive_not_a_pass():
    a = gpu_result()
    other_grid = copy.deepcopy(a)
    other_grid.grid = "4x2"
    d = diff_runs([a, other_grid], [a], 5.0)
    assert not d.regressed and d.inconclusive and d.only_a == [(a.setup_name, "4x2", a.backend)] and d.compared_cells == 1
    disjoint = diff_runs([other_grid], [a], 5.0)
    assert disjoint.inconclusive and disjoint.compared_cells == 0
    assert not diff_runs([a], [a, other_grid], 5.0).inconclusive  # a cell new in run B was never promised
    broken = diff_runs([a, other_grid], [failed(a, "Failed to initialize any NET plugin")], 5.0)
    assert broken.regressed and not broken.inconclusive  # a regression is the answer, whatever else is missing


def test_slow_against_recorded_gpu_baseline_is_a_regression_with_measured_and_expected():
    from envmatrix.app.report import load_baseline
    from envmatrix.judgement.thresholds import judge

    a = gpu_result()
    size = max(m["size_bytes"] for m in a.metrics if m["collective"] == "allreduce")
    floors = load_baseline(str(GPU_BENCH), "10%")  # the recorded 2x2 H200 run's own store as the baseline
    assert judge(copy.deepcopy(a), floors).outcome == "pass"
    assert judge(slowed(a, "allreduce", size, 0.95), floors).outcome == "pass"  # inside the tolerance
    slow = judge(slowed(a, "allreduce", size, 0.8), floors)
    assert slow.outcome == "slow" and "< expected" in slow.root_cause["line"] and "-10%" in slow.root_cause["line"]
    d = diff_runs([a], [slow], 50.0)  # a drop under diff's own threshold: the slow verdict alone is the regression
    assert d.regressed and [(f.before, f.after) for f in d.broke] == [("pass", "slow")] and "expected" in d.broke[0].line


def _store(path, results):
    with SqliteStore(str(path / "results.sqlite")) as store:
        for r in results:
            store.put(r)
    return path


def test_cli_gate_on_recorded_gpu_run(cli, tmp_path):
    a = gpu_result()
    size = max(m["size_bytes"] for m in a.metrics if m["collective"] == "alltoall")
    run_a = tmp_path / "a"
    shutil.copytree(GPU_BENCH, run_a)
    run_b = _store(tmp_path / "b", [slowed(a, "alltoall", size, 0.8)])
    same = cli.run("diff", str(run_a), str(run_a))
    assert same.returncode == 0 and "no regression" in same.stdout, same.stdout + same.stderr
    done = cli.run("diff", str(run_a), str(run_b), "--busbw-drop", "10%")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"(env) 2x2 [nccl] alltoall {size} B" in done.stdout and "(-20.0%)" in done.stdout
    as_json = cli.run("diff", str(run_a), str(run_b / "results.sqlite"), "--busbw-drop", "25%", "--json")
    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["regressed"] is False and data["busbw_regressions"] == [] and data["busbw_points_compared"] > 0
    bad = cli.run("diff", str(run_a), str(run_b), "--busbw-drop", "lots")
    assert bad.returncode == 2 and "--busbw-drop 'lots'" in bad.stderr and "Traceback" not in bad.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = cli.run("diff", str(run_a), str(empty))
    assert nothing.returncode == 2 and "no results (results.sqlite or results.json)" in nothing.stderr
    moved = copy.deepcopy(a)
    moved.grid = "4x2"
    run_c = _store(tmp_path / "c", [moved])  # another grid only: nothing of run A was compared
    disjoint = cli.run("diff", str(run_a), str(run_c))
    assert disjoint.returncode == 3 and "INCONCLUSIVE: no cell" in disjoint.stdout, disjoint.stdout + disjoint.stderr
    as_json = cli.run("diff", str(run_a), str(run_c), "--json")
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["inconclusive"] is True



def test_a_search_run_directory_is_named_as_one_not_as_empty(cli, tmp_path):
    # a search's trials and confirmation rows are no matrix cells: diff said "no sweep or bench results there
    # (results.sqlite or results.json)" of a results.sqlite holding them
    probe = copy.deepcopy(gpu_result())
    probe.sweep_id = "search-study-1"
    run_s = _store(tmp_path / "s", [probe])
    done = cli.run("diff", str(run_s), str(run_s))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (f"envmatrix: error: diff: {run_s}: only search or bisect probes (1); "
                                   "allowed: the run directory of a sweep or a bench")

CONF = """
name: gate
backend: gloo
grids: [1x2]
setups:
  tuned: {ENV}
probe:
  timeout_s: 60
  collectives: [allreduce]
"""


@pytest.mark.slow
def test_cli_gate_on_real_gloo_sweeps(cli, tmp_path):
    """Before: the setup passes; after an env change (the 'upgrade') the same cell fails for real."""
    before = write_conf(tmp_path / "before.yaml", CONF.replace("{ENV}", "{TORCH_DISTRIBUTED_DEBUG: 'OFF'}"))
    after = write_conf(tmp_path / "after.yaml", CONF.replace("{ENV}", "{GLOO_SOCKET_IFNAME: envmx_missing0}"))
    for conf, out in ((before, "a"), (after, "b")):
        done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / out))
        assert done.returncode == (0 if out == "a" else 1), done.stdout + done.stderr  # run b has a failed cell
    gate = cli.run("diff", str(tmp_path / "a"), str(tmp_path / "b"))
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "REGRESSION (tuned) 1x2 [gloo]: pass -> init_error" in gate.stdout and "envmx_missing0" in gate.stdout
    reverse = cli.run("diff", str(tmp_path / "b"), str(tmp_path / "a"), "--json")
    assert reverse.returncode == 0
    (fixed,) = json.loads(reverse.stdout)["fail_to_pass"]
    assert fixed["setup"] == "tuned" and "envmx_missing0" in fixed["line"]
