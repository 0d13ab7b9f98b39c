"""Packing: pure planner cases, then a real packed CPU sweep whose runs overlap."""

from __future__ import annotations

import json

import pytest

from conftest import assert_no_processes, write_conf
from envmatrix.env import Atom, Setup
from envmatrix.planning import Grid, ProbeSpec, plan_runs
from envmatrix.planning.packing import Packed, lanes, pack_batches, parse_jobs

PROBE = ProbeSpec.make("builtin", {"timeout_s": 60})
BENCH = ProbeSpec.make("builtin", {"timeout_s": 60, "bench": {"collectives": ["allreduce"], "sizes": [1024]}})


def _runs(n, grid, backend="nccl", probe=PROBE):
    return plan_runs([Setup(f"s{i}", (Atom("NCCL_ALGO", value=str(i)),)) for i in range(n)], [grid], probe, backend, "local")


def test_one_gpu_runs_pack_onto_disjoint_devices():
    batches = pack_batches(_runs(5, Grid(1, 1)), "nccl", 2, "auto", 16)
    assert [[p.cuda_visible for p in b] for b in batches] == [["0", "1"], ["0", "1"], [None]]
    assert batches[0][1].env({"A": "1"}) == {"A": "1", "CUDA_VISIBLE_DEVICES": "1"} and batches[0][1].gpus(2) == 1


def test_emulated_nodes_and_visible_device_list_are_respected():
    runs = _runs(2, Grid(2, 1))  # 2 emulated nodes x 1 rank: 2 GPUs per run
    batches = pack_batches(runs, "nccl", 4, 2, 64, visible="4,5,6,7")
    assert [[p.cuda_visible for p in b] for b in batches] == [["4,5", "6,7"]]


def test_runs_filling_the_host_and_jobs_1_are_never_packed():
    assert all(len(b) == 1 and b[0].cuda_visible is None for b in pack_batches(_runs(3, Grid(1, 2)), "nccl", 2, "auto", 16))
    assert all(len(b) == 1 for b in pack_batches(_runs(3, Grid(1, 1)), "nccl", 2, 1, 16))


def test_bench_runs_pack_only_when_asked_explicitly():
    runs = _runs(2, Grid(1, 1), probe=BENCH)
    assert lanes(runs[0], "nccl", 2, "auto", 16) == 1
    assert lanes(runs[0], "nccl", 2, 2, 16) == 2


def test_cpu_lanes_are_bounded_by_cores():
    run = _runs(1, Grid(1, 2), backend="gloo")[0]
    assert lanes(run, "gloo", 0, "auto", 2) == 1
    assert lanes(run, "gloo", 0, 8, 8) == 4
    assert pack_batches(_runs(2, Grid(1, 1), backend="gloo"), "gloo", 0, "auto", 2) == [
        [Packed(r) for r in _runs(2, Grid(1, 1), backend="gloo")]
    ]


@pytest.mark.parametrize("bad", ["0", "-1", "two", ""])
def test_parse_jobs_rejects_with_what_is_allowed(bad):
    with pytest.raises(ValueError, match="allowed"):
        parse_jobs(bad)
    assert parse_jobs("3") == 3 and parse_jobs("auto") == "auto"


def test_cli_bad_jobs_is_exit_2_and_writes_nothing(cli, tmp_path):
    done = cli.run("sweep", "backend=gloo", "--jobs", "zero", "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "--jobs 'zero'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_packed_cpu_sweep_overlaps_runs_and_passes(cli, tmp_path):
    setups = "\n".join(f"  s{i}: {{ENVMATRIX_T: '{i}'}}" for i in range(4))
    conf = write_conf(tmp_path / "p.yaml", f"backend: gloo\ngrids: [1x1]\nsetups:\n{setups}\nprobe: {{timeout_s: 90}}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"), "--jobs", "2", "--allow-unknown-vars", timeout=400)
    assert done.returncode == 0, done.stderr + done.stdout
    results = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    assert len(results) == 4 and all(r["outcome"] == "pass" for r in results)
    spans = sorted((r["started_at"], r["finished_at"]) for r in results)
    assert any(b[0] < a[1] for a, b in zip(spans, spans[1:])), spans  # two runs were in flight at once
    assert_no_processes(cli.marker)
