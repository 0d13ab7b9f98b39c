import pytest

from envmatrix.bench.aggregate import aggregate_rows, headline_rows
from envmatrix.bench.formulas import ALL, bandwidths
from envmatrix.bench.sizes import aligned_count, format_size, parse_size, size_sweep, warmup_sweep
from envmatrix.errors import ConfigError


def test_sync_patterns_have_no_busbw_factor():
    # The nccl-tests factors themselves are checked once, in tests/contracts/test_collectives_contract.py.
    assert ALL["ps_central"].factor is None and ALL["ps_sharded"].factor is None


def test_bandwidths_reproduce_an_nccl_tests_row():
    # all_reduce_perf -g 4 row: 536870912 B in 2700.0 us -> algbw 198.84, busbw 298.26
    algbw, busbw = bandwidths("allreduce", 536870912, 2700.0, 4)
    assert round(algbw, 2) == 198.84 and round(busbw, 2) == 298.26
    assert bandwidths("ps_central", 1024, 1.0, 4)[1] is None


def test_sizes():
    assert size_sweep(8, 64, 2) == [8, 16, 32, 64]
    assert size_sweep(64 << 20, 1 << 30, 4) == [64 << 20, 256 << 20, 1 << 30]
    assert size_sweep(100, 300, step_bytes=100) == [100, 200, 300]
    assert parse_size("256M") == 256 << 20 and parse_size("1G") == 1 << 30 and parse_size(8) == 8 and parse_size("64KiB") == 64 << 10
    assert format_size(1 << 30) == "1G" and format_size(24) == "24B"
    for bad in ("0", "-1", "1.5G", "lots"):
        with pytest.raises(ConfigError):
            parse_size(bad)
    with pytest.raises(ConfigError):
        size_sweep(64, 8)


def test_size_errors_name_the_keys_as_given():
    from envmatrix.probes.builtin import normalize_bench

    # a config's probe.bench names its own keys (was "bench: min_bytes 1048576 > max_bytes 1024", "bench.factor")
    with pytest.raises(ConfigError, match=r"^probe.bench.min_bytes 1M > probe.bench.max_bytes 1K; allowed: "
                                          r"probe.bench.min_bytes <= probe.bench.max_bytes$"):
        normalize_bench({"min_bytes": "1M", "max_bytes": "1K"}, "probe.bench", "gloo")
    with pytest.raises(ConfigError, match=r"^probe.bench.factor: 1 not allowed; allowed: a number > 1 \(or give probe.bench.step_bytes\)$"):
        normalize_bench({"factor": 1}, "probe.bench", "gloo")
    with pytest.raises(ConfigError, match=r"^probe.bench.collectives: none given; allowed: one or more of allreduce"):
        normalize_bench({"collectives": []}, "probe.bench", "gloo")
    # values of the wrong kind: TypeError tracebacks (collectives null, factor text) or taken as true/1 (check, iters)
    for raw, expect in (({"collectives": None}, r"^probe.bench.collectives: None is not a list"),
                        ({"factor": "abc"}, r"^probe.bench.factor: 'abc' is not a number"),
                        ({"timing": ["host"]}, r"^probe.bench.timing: \['host'\] not allowed"),
                        ({"check": "no"}, r"^probe.bench.check: 'no' not allowed; allowed: true, false$"),
                        ({"iters": True}, r"^probe.bench.iters: True not allowed")):
        with pytest.raises(ConfigError, match=expect):
            normalize_bench(raw, "probe.bench", "gloo")
    flags = {"min_bytes": "-b", "max_bytes": "-e", "factor": "-f", "step_bytes": "-i"}
    with pytest.raises(ConfigError, match=r"^-b 64B > -e 8B; allowed: -b <= -e$"):
        size_sweep(64, 8, keys=flags)


def test_warmup_sweep_doubles_from_the_smallest_size_to_e_like_nccl_tests():
    assert warmup_sweep([8, 64, 512]) == [8, 16, 32, 64, 128, 256, 512]
    # -b 8 -e 64M -f 8 sweeps up to 16M, nccl-tests warms up to 64M
    assert warmup_sweep([8 << 20, 64 << 20 >> 2], 64 << 20) == [8 << 20, 16 << 20, 32 << 20, 64 << 20]
    assert warmup_sweep([100, 200, 300]) == [100, 200]  # -i steps: still doubling, never past the largest
    assert warmup_sweep([300, 100]) == [100, 200] and warmup_sweep([]) == []


def test_aligned_count_like_nccl_tests():
    assert aligned_count(1000, 4, 4, True) == 248
    assert aligned_count(1000, 4, 4, False) == 250
    assert aligned_count(8, 4, 4, True) == 4  # at least one element per rank


def test_aggregate_averages_rank_times_then_computes_bandwidth():
    rows = [
        {"collective": "allreduce", "size_bytes": 1 << 30, "count": 1 << 28, "dtype": "float32", "time_us": t,
         "time_min_us": t - 10, "time_median_us": t, "time_max_us": t + 10, "wrong": w, "iters": 20}
        for t, w in ((4000.0, 0), (6000.0, 2))
    ]
    (row,) = aggregate_rows(rows, 2)
    assert row["time_us"] == 5000.0 and row["wrong"] == 2 and row["time_min_us"] == 3990.0 and row["time_max_us"] == 6010.0
    assert row["algbw_gbps"] == pytest.approx((1 << 30) / 5e-3 / 1e9)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 1.0)


def test_headline_rows_prefer_out_of_place_per_point_and_keep_in_place_only_points():
    # nccl-tests output holds both columns per size; a torch-path run holds in-place allreduce beside
    # out-of-place allgather: each point keeps its out-of-place row if measured, else its in-place one
    rows = [
        {"collective": "allreduce", "size_bytes": 64, "dtype": "float32", "in_place": True, "busbw_gbps": 1.0},
        {"collective": "allreduce", "size_bytes": 64, "dtype": "float32", "in_place": False, "busbw_gbps": 2.0},
        {"collective": "allgather", "size_bytes": 64, "dtype": "float32", "in_place": False, "busbw_gbps": 3.0},
        {"collective": "allgather", "size_bytes": 64, "dtype": "float32", "in_place": True, "busbw_gbps": 4.0},
        {"collective": "broadcast", "size_bytes": 64, "dtype": "float32", "in_place": True, "busbw_gbps": 5.0},
        {"collective": "broadcast", "size_bytes": 64, "dtype": "int32", "in_place": False, "busbw_gbps": 6.0},
    ]
    assert [r["busbw_gbps"] for r in headline_rows(rows)] == [2.0, 3.0, 5.0, 6.0]
    assert headline_rows([]) == []


def test_aggregate_keeps_the_ranks_placement():
    row = {"collective": "allreduce", "size_bytes": 64, "dtype": "float32", "time_us": 5.0, "time_min_us": 5.0,
           "time_median_us": 5.0, "time_max_us": 5.0, "wrong": 0}
    (inplace,) = aggregate_rows([{**row, "in_place": True}], 1)
    (oop,) = aggregate_rows([row], 1)
    assert inplace["in_place"] is True and oop["in_place"] is False
