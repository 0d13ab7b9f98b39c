"""``envmatrix bench`` takes the config's probe: keys (YAML or override): they were dropped, so probe.timeout_s=30
ran under --timeout's 600 s and a config's probe.bench measured bench's own defaults. A flag given wins; a flag
left out leaves the config's key; a key nobody set keeps bench's default (600 s, BENCH_DEFAULTS)."""

from __future__ import annotations

import pytest

from conftest import assert_no_processes, write_conf
from envmatrix.app.bench import BenchRequest, bench_from_flags, user_probe_keys
from envmatrix.app.report import load_results
from envmatrix.config.compose import CONF_DIR

TINY = ["backend=gloo", "--grid", "1x1", "-c", "allreduce", "-e", "64", "-n", "2", "-w", "0"]


def _probe(out):
    (result,) = [r for r in load_results(str(out)) if r.probe["params"].get("bench")]
    return result.probe["params"]


def test_the_keys_a_user_set_are_the_chosen_file_and_the_overrides_not_the_packaged_defaults(tmp_path):
    conf = write_conf(tmp_path / "c.yaml", "probe: {timeout_s: 45, bench: {iters: 3}}\n")
    assert user_probe_keys([], conf) == {"timeout_s", "bench"}
    assert user_probe_keys(["probe.timeout_s=30", "+probe.nccl_debug=INFO"], None) == {"timeout_s", "nccl_debug"}
    assert user_probe_keys(["probe={timeout_s: 30}"], None) == {"timeout_s"}
    assert user_probe_keys([], CONF_DIR / "default.yaml") == set()  # its timeout_s: 120 is no user's choice


def test_a_flag_given_wins_and_a_flag_left_out_leaves_the_configs_key():
    configured = {"collectives": ["allgather"], "min_bytes": 1024, "max_bytes": 4096, "factor": 2.0, "step_bytes": None,
                  "iters": 3, "warmup": 1, "dtype": "float16", "check": True, "timing": "blocking"}
    bench, names = bench_from_flags(BenchRequest(iters=7, no_check=True), configured, "gloo")
    assert bench == {**configured, "iters": 7, "check": False}
    assert names["max_bytes"] == "probe.bench.max_bytes"
    bench, names = bench_from_flags(BenchRequest(factor=4, max_bytes="8K"), {**configured, "step_bytes": 512}, "gloo")
    assert (bench["factor"], bench["step_bytes"], bench["max_bytes"]) == (4.0, None, 8192)  # -f: multiply, not add
    assert names["max_bytes"] == "-e/--max-bytes"
    bench, _ = bench_from_flags(BenchRequest(), {}, "gloo")  # nothing set anywhere: bench's defaults
    assert (bench["collectives"], bench["iters"], bench["warmup"], bench["min_bytes"]) == (
        ["allreduce", "allgather", "alltoall"], 20, 5, 8)


@pytest.mark.slow
def test_bench_runs_under_the_configs_probe_keys_unless_a_flag_says_otherwise(cli, tmp_path):
    conf = write_conf(tmp_path / "c.yaml", "name: pk\nbackend: gloo\ngrids: [1x1]\nprobe:\n  timeout_s: 45\n"
                                           "  bench: {collectives: [allreduce], min_bytes: 8, max_bytes: 64, iters: 3, warmup: 0}\n")
    runs = {"override": [*TINY, "probe.timeout_s=30"], "yaml": [f"conf={conf}"],
            "flags": [f"conf={conf}", "-n", "4", "--timeout", "50"], "neither": TINY}
    for name, args in runs.items():
        done = cli.run("bench", *args, "--out", str(tmp_path / name))
        assert done.returncode == 0, (name, done.stdout[-2000:] + done.stderr[-2000:])
    got = {name: _probe(tmp_path / name) for name in runs}
    assert got["override"]["timeout_s"] == 30  # was 600
    assert got["yaml"]["timeout_s"] == 45 and got["yaml"]["bench"]["iters"] == 3  # were 600 and 20
    assert got["yaml"]["bench"]["sizes"] == [8, 16, 32, 64] and got["yaml"]["bench"]["collectives"] == ["allreduce"]
    assert got["flags"]["timeout_s"] == 50 and got["flags"]["bench"]["iters"] == 4
    assert got["neither"]["timeout_s"] == 600 and got["neither"]["bench"]["iters"] == 2
    assert_no_processes(cli.marker)


@pytest.mark.slow
def test_bench_pairs_hosts_runs_under_the_configs_probe_timeout(cli, tmp_path):
    out = tmp_path / "pairs"
    done = cli.run("bench", "backend=gloo", "probe.timeout_s=40", "--pairs", "hosts", "--grid", "2x1", "--pair-size",
                   "64", "-n", "2", "-w", "0", "--iperf-seconds", "1", "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert {r.probe["params"]["timeout_s"] for r in load_results(str(out))} == {40}  # was 600
    assert_no_processes(cli.marker)
