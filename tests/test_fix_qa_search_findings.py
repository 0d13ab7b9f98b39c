"""QA of search on configs nobody tuned on (/tmp/qa_configs/FINDINGS.md F2, F4, F6, F12), the CLI as users run it:

F2. An objective at a nominal size (reduce_scatter @10K) on a 3-rank grid failed every trial with no_metric, exit 1:
    the split collectives are measured at nccl-tests' aligned size (10236 B), the objective looked for 10240 B.
F4. `export` after a search stopped by search.max_failure_rate exported its unconfirmed best, exit 0, saying
    "search.confirm_top_k=0 or an older study" (confirm_top_k was 1): now NOT CONFIRMED, the true reason, exit 3.
F6. A busbw objective on a 1x1 grid (busbw of allreduce is 0 on one rank) launched trials that all failed, exit 1:
    now bad input before anything runs (exit 2, one line, nothing written).
F12. A resumed study took a changed probe (bench iterations) and ranked both probes' trials together, while a
    changed space, objective or grid set was refused: now refused the same way (exit 2, naming the key)."""

from __future__ import annotations

import math

import pytest

from conftest import write_conf
from envmatrix.errors import ConfigError
from envmatrix.search.objective import evaluate, parse_objective
from search_helpers import load

THREE_RANKS = """
name: {name}
backend: gloo
grids: [1x3]
probe:
  timeout_s: 60
  collectives: [allreduce]
  bench: {{collectives: [reduce_scatter], min_bytes: 10K, max_bytes: 10K, iters: 2, warmup: 1}}
search:
  trials: {trials}
  confirm_top_k: 0
  space: {{TORCH_DISTRIBUTED_DEBUG: ["OFF", INFO]}}
  objective: {{collective: reduce_scatter, size: 10K}}
"""


def _row(size: int, busbw: float) -> dict:
    # as the builtin bench stores it on 3 ranks: count is nccl-tests' per-rank count
    return {"collective": "reduce_scatter", "size_bytes": size, "count": size // 4 // 3, "dtype": "float32",
            "in_place": False, "time_us": 10.0, "busbw_gbps": busbw}


def test_objective_reads_the_row_measured_for_its_nominal_size_on_three_ranks():
    objective = parse_objective({"collective": "reduce_scatter", "sizes": ["10K", "20K"], "weights": {"10K": 3}},
                                "search.objective", ["1x3"])
    # 10K and 20K of float32 on 3 ranks: 2559 and 5118 elements, 10236 B and 20472 B
    rows = {"1x3": [_row(10236, 2.0), _row(20472, 5.0)]}
    assert evaluate(objective, rows) == pytest.approx(math.exp((3 * math.log(2.0) + math.log(5.0)) / 4))


def test_objective_of_an_unsplit_collective_reads_its_size_as_swept():
    objective = parse_objective({"collective": "allreduce", "size": "10K"}, "search.objective", ["1x1", "1x3"])
    rows = [{"collective": "allreduce", "size_bytes": 10240, "count": 2560, "dtype": "float32", "busbw_gbps": 4.0}]
    assert evaluate(objective, {"1x3": rows}) == pytest.approx(4.0)  # allreduce is not split by ranks


@pytest.mark.slow
def test_search_objective_on_three_ranks_reads_the_aligned_row(cli, tmp_path):
    conf = write_conf(tmp_path / "obj.yaml", THREE_RANKS.format(name="obj3", trials=1))
    run = tmp_path / "run"
    done = cli.run("search", f"conf={conf}", "--out", str(run), timeout=180)
    out = done.stdout + done.stderr
    assert "no_metric" not in out, out
    assert done.returncode == 0, out
    (trial,) = load(run, "obj3").get_trials()
    assert trial.user_attrs["fidelity"] == "reduce_scatter@10236B x2", trial.user_attrs
    # the compact busbw table is rounded to 4 decimals
    assert trial.values[0] == pytest.approx(trial.user_attrs["metrics"]["1x3"]["reduce_scatter"]["10236"], abs=5e-5)


@pytest.mark.slow
def test_export_after_max_failure_rate_stop_is_not_confirmed_and_inconclusive(cli, tmp_path):
    conf = write_conf(tmp_path / "fr.yaml", """
name: failrate
backend: gloo
grids: [1x2]
probe:
  timeout_s: 60
  collectives: [allreduce]
  bench: {collectives: [allgather], min_bytes: 2K, max_bytes: 8K, iters: 2, warmup: 1}
search:
  trials: 3
  sampler: bruteforce
  confirm_top_k: 1
  confirm_repeats: 1
  confirm_max_repeats: 1
  space: {GLOO_SOCKET_IFNAME: [lo, qa_missing0, qa_missing1]}
  objective: {collective: allgather, size: 8K}
""")
    run = str(tmp_path / "run")
    done = cli.run("search", f"conf={conf}", "--out", run, timeout=240)
    assert done.returncode == 1 and "max_failure_rate" in done.stderr, done.stdout + done.stderr
    exported = cli.run("export", "--out", run, timeout=120)
    out = exported.stdout + exported.stderr
    assert "search.confirm_top_k=0" not in out, out  # confirm_top_k was 1: the search stopped before confirming
    assert "not confirmed: the search stopped before its confirmation (search: 2 of 3 trials failed" in out, out
    assert "max_failure_rate" in out and "the default env's busbw:allgather@8K" in out, out
    assert exported.returncode == 3, out  # inconclusive: one measurement of a study cut short
    best = (tmp_path / "run" / "export" / "best.sh").read_text()
    assert "NOT CONFIRMED (the search stopped before its confirmation)" in best.splitlines()[0], best
    # the same command resumes the study, now confirms (no new trial to fail), and the export is final
    again = cli.run("search", f"conf={conf}", "--out", run, timeout=240)
    assert again.returncode == 0, again.stdout + again.stderr
    final = cli.run("export", "--out", run, timeout=120)
    assert final.returncode == 0 and "not confirmed" not in final.stdout, final.stdout + final.stderr


ONE_RANK = """
name: one
backend: gloo
grids: [1x1]
probe:
  timeout_s: 60
  collectives: [allreduce]
  bench: {collectives: [allreduce, broadcast], min_bytes: 4K, max_bytes: 4K, iters: 2, warmup: 1}
search:
  trials: 1
  confirm_top_k: 0
  space: {TORCH_DISTRIBUTED_DEBUG: ["OFF", INFO]}
  objective: {collective: allreduce, size: 4K}
"""


def test_busbw_objective_on_one_rank_grid_is_bad_input(cli, tmp_path):
    conf = write_conf(tmp_path / "one.yaml", ONE_RANK)
    done = cli.run("search", f"conf={conf}", "--out", str(tmp_path / "run"), timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "search.objective.metric: busbw of allreduce is 0 on grid 1x1" in line, line
    assert "allowed: metric: time" in line and "(broadcast, reduce)" in line, line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("objective", ["{collective: allreduce, size: 4K, metric: time}",
                                       "{collective: broadcast, size: 4K}"])
def test_one_rank_objectives_that_measure_something_are_accepted(cli, tmp_path, objective):
    conf = write_conf(tmp_path / "one.yaml", ONE_RANK.replace("{collective: allreduce, size: 4K}", objective))
    done = cli.run("search", f"conf={conf}", "--dry-run", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_reopened_study_with_another_probe_is_refused_naming_the_key():
    import optuna

    from envmatrix.search.study import open_study

    storage = optuna.storages.InMemoryStorage()
    probe = {"name": "builtin", "params": {"bench": {"iters": 3, "sizes": [1024]}, "timeout_s": 60}}
    meta = {"space": {}, "objectives": [], "grids": ["1x2"], "backend": "gloo", "probe": probe}
    open_study(storage, "s", ["maximize"], None, meta)
    open_study(storage, "s", ["maximize"], None, dict(meta))  # the same probe resumes
    changed = {**probe, "params": {**probe["params"], "bench": {"iters": 1, "sizes": [1024]}}}
    with pytest.raises(ConfigError, match=r"^probe\.bench\.iters: 1 given, but study 's' was created with "
                                          r"probe\.bench\.iters 3; allowed: 3 to resume it, or another search\.study_name$"):
        open_study(storage, "s", ["maximize"], None, {**meta, "probe": changed})


@pytest.mark.slow
def test_resumed_search_with_another_probe_is_refused(cli, tmp_path):
    conf = write_conf(tmp_path / "probe.yaml", THREE_RANKS.format(name="probe3", trials=1))
    run = str(tmp_path / "run")
    first = cli.run("search", f"conf={conf}", "--out", run, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    again = cli.run("search", f"conf={conf}", "--out", run, "search.trials=2", "probe.bench.iters=1", timeout=180)
    assert again.returncode == 2, again.stdout + again.stderr
    assert again.stderr.strip().splitlines()[-1] == (
        "envmatrix: error: probe.bench.iters: 1 given, but study 'probe3' was created with probe.bench.iters 2; "
        "allowed: 2 to resume it, or another search.study_name"), again.stderr
    assert len(load(tmp_path / "run", "probe3").get_trials()) == 1  # nothing ran under the other probe
