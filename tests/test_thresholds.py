"""Expected-bandwidth thresholds: the expect: block, --baseline/--tolerance, and the slow outcome.

The pure parts (parsing, the verdict, the one place that sets ``slow``) are checked on hand-made results;
the end-to-end tests run real gloo ranks, one of them over a loopback link rate-limited with ``tc`` in a
network namespace the test creates.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from cluster_fixture import ns_cluster  # noqa: F401  (fixture)
from conftest import write_conf
from envmatrix.errors import ConfigError
from envmatrix.results import OUTCOMES, PASS, SLOW, ProbeResult
from envmatrix.bench.expect import BUSBW, TIME, Expectation
from envmatrix.config.expect import parse_expect
from envmatrix.judgement.thresholds import baseline_expectations, evaluate_thresholds, judge, parse_percent


def result(grid="1x2", setup="a", outcome=PASS, points=((("allreduce", 1 << 20), 10.0, 100.0),), backend="gloo"):
    metrics = [{"collective": c, "size_bytes": s, "in_place": False, "busbw_gbps": bw, "algbw_gbps": bw, "time_us": t}
               for (c, s), bw, t in points]
    # an in-place row must not be what is judged (nccl-tests' headline is out-of-place)
    metrics += [{**m, "in_place": True, "busbw_gbps": 1e9, "time_us": 1e-9} for m in metrics]
    return ProbeResult("k", {"name": setup, "atoms": []}, grid, {"name": "builtin"}, backend, "local", outcome,
                       root_cause={} if outcome == PASS else {"rank": 1, "outcome": outcome, "line": "boom"}, metrics=metrics)


def test_slow_is_a_listed_outcome():
    assert SLOW in OUTCOMES


def test_expect_block_general_and_per_grid():
    exps = parse_expect({"allreduce": {"1M": {"busbw_gbps": 8}, 8: {"time_us": 30}},
                         "1x4": {"alltoall": {"1G": {"busbw_gbps": 300.5}}}}, "c.yaml")
    assert Expectation("allreduce", 1 << 20, BUSBW, 8.0) in exps
    assert Expectation("allreduce", 8, TIME, 30.0) in exps
    assert Expectation("alltoall", 1 << 30, BUSBW, 300.5, grid="1x4") in exps
    assert parse_expect(None, "c.yaml") == () and parse_expect({}, "c.yaml") == ()


@pytest.mark.parametrize("block, fragment", [
    (5, "expect: 5 is not a mapping"),
    ({"allreduse": {"1M": {"busbw_gbps": 1}}}, "did you mean allreduce?"),
    ({"allreduce": {"1Q": {"busbw_gbps": 1}}}, "expect.allreduce.1Q: '1Q' is not a size"),
    ({"allreduce": {"1M": {"busbw": 1}}}, "did you mean busbw_gbps?"),
    ({"allreduce": {"1M": {"busbw_gbps": 0}}}, "busbw_gbps: 0 is not allowed; allowed: a number > 0 (GB/s)"),
    ({"allreduce": {"1M": {"time_us": True}}}, "time_us: True is not allowed"),
    ({"allreduce": {"1M": 7}}, "expect.allreduce.1M: 7 is not a mapping"),
    ({"2x0": {"allreduce": {"1M": {"time_us": 1}}}}, "expect.2x0: '2x0' is not a grid"),
    ({"1x4": 7}, "expect.1x4: 7 is not a mapping; allowed: collectives, e.g. expect: {1x4: {allreduce: {64M: {"),
])
def test_expect_block_errors_name_key_and_value(block, fragment):
    with pytest.raises(ConfigError, match="c.yaml") as info:
        parse_expect(block, "c.yaml")
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_the_grid_example_an_error_suggests_parses():
    import yaml

    with pytest.raises(ConfigError) as info:
        parse_expect({"1x4": 7}, "c.yaml")
    example = yaml.safe_load(str(info.value).split("e.g. ", 1)[1])
    assert parse_expect(example["expect"], "c.yaml") == (Expectation("allreduce", 64 << 20, BUSBW, 250.0, grid="1x4"),)


def test_busbw_floor_time_ceiling_and_grid_override():
    exps = parse_expect({"allreduce": {"1M": {"busbw_gbps": 5, "time_us": 90}}, "1x2": {"allreduce": {"1M": {"busbw_gbps": 20}}}}, "c")
    verdict = evaluate_thresholds(result(), exps)  # measured 10 GB/s, 100 us
    by = {c.metric: c for c in verdict.checks}
    assert by[BUSBW].expected == 20 and by[BUSBW].met is False  # the 1x2 row beats the every-grid row
    assert by[TIME].met is False and "100 us > expected 90 us" in by[TIME].line()
    assert verdict.slow and "busbw 10 GB/s < expected 20 GB/s" in verdict.line() and "+1 more" in verdict.line()
    on_other_grid = evaluate_thresholds(result(grid="2x1"), exps)
    assert {c.metric: c.met for c in on_other_grid.checks} == {BUSBW: True, TIME: False}


def test_judge_is_the_one_place_that_sets_and_clears_slow():
    r = judge(result(), parse_expect({"allreduce": {"1M": {"busbw_gbps": 50}}}, "c"))
    assert r.outcome == SLOW and not r.passed
    assert r.root_cause["line"] == "allreduce 1M busbw 10 GB/s < expected 50 GB/s (expect)"
    assert r.thresholds[0]["measured"] == 10.0 and r.thresholds[0]["expected"] == 50.0 and r.thresholds[0]["met"] is False
    assert judge(r, parse_expect({"allreduce": {"1M": {"busbw_gbps": 1}}}, "c")).outcome == PASS and r.root_cause == {}
    assert judge(r, ()).outcome == PASS and r.thresholds == []
    failed = judge(result(outcome="init_error"), parse_expect({"allreduce": {"1M": {"busbw_gbps": 50}}}, "c"))
    assert failed.outcome == "init_error" and failed.root_cause["line"] == "boom"  # a failure stays the failure


def test_unmeasured_expectation_is_shown_not_slow():
    r = judge(result(), parse_expect({"allgather": {"1M": {"busbw_gbps": 50}}}, "c"))
    assert r.outcome == PASS and r.thresholds[0]["met"] is None and "not measured" in r.thresholds[0]["line"]


def test_expectations_the_bench_never_measures_are_warned_of():
    from envmatrix.bench.expect import unmeasured_warning

    exps = parse_expect({"allreduce": {"64K": {"busbw_gbps": 1}}, "alltoall": {"1M": {"busbw_gbps": 1}}}, "x.yaml")
    bench = {"collectives": ["allreduce"], "sizes": [16384, 65536]}
    assert unmeasured_warning(exps, None, "builtin", {}) == (
        "warning: expect: 2 expectations, but probe.bench is not set, so the probe measures nothing and none is judged;"
        " add probe.bench (its collectives and sizes) to judge them")
    assert unmeasured_warning(exps, bench, "builtin", {}) == (
        "warning: expect: alltoall 1M is not measured by probe.bench (allreduce at 16K-64K), so it judges nothing;"
        " allowed: a collective and size the bench sweeps")
    assert unmeasured_warning(exps[:1], bench, "builtin", {}) is None
    assert unmeasured_warning(exps, None, "command", {}) is None  # nccl-tests' own sizes are known only when it runs
    assert unmeasured_warning((), None, "builtin", {}) is None



def test_an_expectation_is_judged_at_the_size_its_size_was_measured_at():
    # reduce_scatter 10K on 3 ranks is 2560 float32, rounded down to 2559 (a multiple of 3): a 10236 B row
    from envmatrix.results import RankResult

    r = result(grid="1x3", points=((("reduce_scatter", 10236), 0.5, 100.0), (("allreduce", 10240), 0.7, 90.0)))
    r.ranks = [RankResult(rank=i) for i in range(3)]
    for m in r.metrics:
        m["dtype"] = "float32"
    exps = parse_expect({"reduce_scatter": {"10K": {"busbw_gbps": 1000}}, "allreduce": {"10K": {"time_us": 50}}}, "c")
    judged = judge(r, exps)
    assert judged.outcome == SLOW, judged.thresholds
    assert [(c["collective"], c["measured"]) for c in judged.thresholds] == [("reduce_scatter", 0.5), ("allreduce", 90.0)]


def test_a_result_without_rank_records_is_judged_at_the_sizes_as_asked():
    # the rank count comes from the rank records: none (a parsed nccl-tests result) is no division by zero
    r = result(grid="1x3", points=((("reduce_scatter", 10236), 0.5, 100.0),))
    for m in r.metrics:
        m["dtype"] = "bfloat16"  # nccl-tests prints this one as the bench names it
    judged = judge(r, parse_expect({"reduce_scatter": {"10K": {"busbw_gbps": 1000}}}, "c"))
    assert judged.outcome == PASS and judged.thresholds[0]["measured"] is None


def test_a_baselines_floor_at_a_measured_size_is_no_unmeasured_warning():
    from envmatrix.bench.expect import unmeasured_warning

    floor = Expectation("alltoall", 2046, BUSBW, 1.0, grid="3x1", source="baseline")  # 2K alltoall, float16, 3 ranks
    bench = {"collectives": ["alltoall"], "sizes": [2048, 16384], "dtype": "float16"}
    assert unmeasured_warning([floor], bench, "builtin", {"3x1": 3}) is None
    assert unmeasured_warning([floor], bench, "builtin", {"3x1": 2}) is not None  # 2 ranks measure 2048 B

@pytest.mark.slow
def test_a_sweep_whose_probe_measures_nothing_says_its_expectations_judge_nothing(cli, tmp_path):
    conf = write_conf(tmp_path / "x.yaml", (BENCH_CONF % "  allreduce:\n    64K: {busbw_gbps: 100000}").replace(
        "  bench: {collectives: [allreduce], min_bytes: 64K, max_bytes: 64K, iters: 3, warmup: 1}\n", "  timeout_s: 60\n"))
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr  # nothing measured, so nothing is slow: said, not hidden
    assert "envmatrix: warning: expect: 1 expectation, but probe.bench is not set" in done.stderr, done.stderr


def test_tolerance_forms():
    assert parse_percent("10%", "--tolerance") == 10.0 and parse_percent("2.5", "--tolerance") == 2.5
    assert parse_percent("0.05", "--tolerance") == pytest.approx(5.0) and parse_percent("0%", "--tolerance") == 0.0
    for bad in ("ten", "100%", "-1%", "150"):
        with pytest.raises(ConfigError, match=r"^--tolerance .*allowed"):
            parse_percent(bad, "--tolerance")


def test_baseline_floors_match_setup_grid_backend():
    base = [result(), result(setup="b", points=((("allreduce", 1 << 20), 40.0, 25.0),)), result(outcome="init_error", setup="c")]
    floors = baseline_expectations(base, 10.0, "baseline run1")
    assert {(f.setup, f.grid, f.backend, round(f.value, 6)) for f in floors} == {("a", "1x2", "gloo", 9.0), ("b", "1x2", "gloo", 36.0)}
    assert judge(result(points=((("allreduce", 1 << 20), 9.5, 100.0),)), floors).outcome == PASS
    slow = judge(result(points=((("allreduce", 1 << 20), 8.0, 100.0),)), floors)
    assert slow.outcome == SLOW and "(baseline run1: 10 GB/s -10%)" in slow.root_cause["line"]
    assert judge(result(setup="other"), floors).thresholds == []  # another setup is not compared
    assert judge(result(backend="nccl"), floors).thresholds == []


# ---- real gloo ranks ------------------------------------------------------------------------------------------

BENCH_CONF = """
name: expect_demo
backend: gloo
grids: [1x2]
setups:
  plain: {}
probe:
  bench: {collectives: [allreduce], min_bytes: 64K, max_bytes: 64K, iters: 3, warmup: 1}
expect:
%s
"""


@pytest.mark.slow
def test_threshold_cpu_cannot_meet_is_slow_everywhere(cli, tmp_path):
    conf = write_conf(tmp_path / "x.yaml", BENCH_CONF % "  1x2:\n    allreduce:\n      64K: {busbw_gbps: 100000}")
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    done = cli.run("sweep", f"conf={conf}", "--out", str(out), "--junit", str(junit))
    both = done.stdout + done.stderr
    assert done.returncode == 1, both
    assert "0 passed, 1 failed (1 slow)" in both and "< expected 100000 GB/s (expect)" in both
    md = (out / "matrix.md").read_text()
    assert "| 1x2 | s |" in md and "| (plain) | 1x2 | slow |" in md
    (stored,) = json.loads((out / "results.json").read_text())["results"]
    assert stored["outcome"] == "slow" and stored["thresholds"][0]["measured"] > 0 and stored["thresholds"][0]["expected"] == 100000
    failure = ET.parse(junit).find(".//failure")
    assert failure.get("type") == "slow" and "expected 100000 GB/s" in failure.get("message")
    html = (out / "report.html").read_text()
    assert 'class="outcome-slow"' in html and "Expectations (measured / expected)" in html and "SLOW" in html
    from report_helpers import load_page

    dom = load_page(out / "report.html").dom  # real Chromium renders the new class
    assert 'tr class="outcome-slow"' in dom and "expected 100000 GB/s" in dom
    # New expectations re-judge the stored cell without measuring again; the new verdict is stored too.
    write_conf(conf, BENCH_CONF % "  1x2:\n    allreduce:\n      64K: {busbw_gbps: 0.000001}")
    again = cli.run("sweep", f"conf={conf}", "--out", str(out))
    assert again.returncode == 0 and "1 already in the store" in again.stdout, again.stdout + again.stderr
    import sqlite3

    with sqlite3.connect(out / "results.sqlite") as db:
        assert [o for (o,) in db.execute("SELECT outcome FROM results ORDER BY seq")] == ["slow", "pass"]
    assert 'class="outcome-slow"' not in (out / "report.html").read_text()


@pytest.mark.slow
def test_threshold_met_passes_and_is_shown(cli, tmp_path):
    conf = write_conf(tmp_path / "x.yaml", BENCH_CONF % "  allreduce:\n    65536: {busbw_gbps: 0.000001, time_us: 100000000}")
    done = cli.run("bench", f"conf={conf}", "--setup", "plain", "--out", str(tmp_path / "b"), "-c", "allreduce",
                   "-b", "64K", "-e", "64K", "-n", "3", "-w", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "expectations (measured / expected)" in done.stdout and "allreduce 64K time" in done.stdout
    (report,) = (tmp_path / "b").glob("bench_*.md")
    text = report.read_text()
    assert "## expectations (measured / expected)" in text and text.count("| met |") == 2


def _rate_limited(argv: list[str]) -> list[str]:
    """argv run in a new network namespace whose loopback (the ranks' only link) is rate-limited by tc."""
    if shutil.which("unshare") is None or shutil.which("tc") is None:
        pytest.skip("needs unshare and tc (util-linux, iproute2) for a rate-limited loopback")
    probe = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"network namespaces not permitted here: {probe.stderr.strip()}")
    # MTU 1500: tbf drops any packet larger than its bucket, and loopback's default MTU is 64 KiB.
    setup = "ip link set lo mtu 1500 up && tc qdisc add dev lo root tbf rate 40mbit burst 64kb latency 1s"
    return ["unshare", "-n", "sh", "-c", f"{setup} && exec {shlex.join(argv)}"]


@pytest.mark.slow
def test_baseline_then_rate_limited_link_is_slow(cli, tmp_path):
    bench = ["bench", "backend=gloo", "--grid", "1x2", "-c", "allreduce", "-b", "256K", "-e", "256K", "-n", "3", "-w", "1"]
    base = tmp_path / "base"
    done = cli.run(*bench, "--out", str(base))
    assert done.returncode == 0, done.stdout + done.stderr
    slowed = subprocess.run(_rate_limited(cli.argv(*bench, "--out", str(tmp_path / "slowed"), "--baseline", str(base),
                                                   "--tolerance", "50%")),
                            cwd=cli.cwd, env=cli.env, capture_output=True, text=True, timeout=240)
    both = slowed.stdout + slowed.stderr
    assert slowed.returncode == 1, both
    assert "slow: allreduce 256K busbw" in both and "(baseline base:" in both and "-50%)" in both
    # Measured against the same run's own figures, the baseline is met: the verdict is not a constant.
    again = cli.run(*bench, "--out", str(tmp_path / "again"), "--baseline", str(base), "--tolerance", "95%")
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.parametrize("name, grid, floors", [("h200_expect_2gpu", "1x2", 14), ("h200_expect_4gpu", "1x4", 12)])
def test_shipped_h200_thresholds_compose_and_every_floor_is_benched(name, grid, floors):
    """The packaged configs compose like any conf=NAME, and their own bench sweep measures every point they judge."""
    from omegaconf import OmegaConf

    from envmatrix.bench.sizes import parse_size, size_sweep
    from envmatrix.config import compose_config

    cfg, path = compose_config([f"conf={name}"])
    data = OmegaConf.to_container(cfg, resolve=True)
    exps = parse_expect(data["expect"], path.name)
    assert len(exps) == floors and data["grids"] == [grid] and all(e.metric == BUSBW and 100 < e.value < 400 for e in exps)
    bench = data["probe"]["bench"]
    sizes = size_sweep(parse_size(bench["min_bytes"]), parse_size(bench["max_bytes"]), bench["factor"])
    assert {(e.collective, e.size_bytes) for e in exps} <= {(c, s) for c in bench["collectives"] for s in sizes}
    assert "margin 10%" in path.read_text() and "h200_box.md" in path.read_text()


@pytest.mark.slow
def test_rate_limited_host_link_on_the_namespace_cluster_is_slow_against_its_baseline(ns_cluster, cli, tmp_path):
    """Two emulated hosts through a real mpirun: the unshaped run is the baseline, then one host's link gets tc htb."""
    import yaml

    cluster = ns_cluster(2)
    probe = {"timeout_s": 60, "bench": {"collectives": ["allreduce"], "min_bytes": "256K", "max_bytes": "256K", "iters": 3, "warmup": 1}}
    conf = tmp_path / "c.yaml"
    conf.write_text(yaml.safe_dump(cluster.conf(grids=["2x1"], probe=probe)))
    fast = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "fast"), timeout=180)
    assert fast.returncode == 0, fast.stdout[-2000:] + fast.stderr[-2000:]
    cluster.rate_limit("node1", "4mbit")
    slow = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "slow"), "--baseline", str(tmp_path / "fast"),
                   "--tolerance", "50%", timeout=180)
    assert slow.returncode == 1, slow.stdout[-2000:] + slow.stderr[-2000:]
    (stored,) = json.loads((tmp_path / "slow" / "results.json").read_text())["results"]
    assert stored["outcome"] == "slow" and "(baseline fast:" in stored["root_cause"]["line"]
    check = stored["thresholds"][0]
    assert check["met"] is False and check["measured"] < check["expected"] / 5  # 4 Mbit/s: far below half the baseline
