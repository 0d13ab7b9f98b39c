"""nccl-tests stdout / -J JSON parser, on fixtures synthesized from the v2.19.6 printf formats.

See tests/data/nccl_tests/README.md: the ``synthetic_*`` files follow the format strings
exactly (field widths included); real ``h200_*`` recordings will join them.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from envmatrix.parsers.nccl_tests import (
    COLLECTIVE_OF_BINARY,
    NcclTestsReport,
    NcclTestsRow,
    collective_of,
    decode_nccl_version,
    looks_like_nccl_tests,
    parse_json,
    parse_stdout,
)

DATA = Path(__file__).parent / "data" / "nccl_tests"


def text(name: str) -> str:
    return (DATA / name).read_text()


def halves(report: NcclTestsReport, size: int, root: int | None = None) -> tuple[NcclTestsRow, NcclTestsRow]:
    rows = [r for r in report.rows if r.size_bytes == size and (root is None or r.root == root)]
    assert len(rows) == 2, rows
    oop, ip = rows
    assert (oop.in_place, ip.in_place) == (False, True)
    return oop, ip


def numbers(row: NcclTestsRow) -> tuple:
    return (row.time_us, row.algbw_gbps, row.busbw_gbps, row.wrong)


H200_DEVICES = [
    {"rank": i, "group": 0, "pid": 40213, "host": "vm", "device": i, "busid": f"0000:00:0{6 + i}", "name": "NVIDIA H200"}
    for i in range(4)
]


# --------------------------------------------------------------------------- all_reduce -g 4


def test_all_reduce_g4_every_field():
    rep = parse_stdout(text("synthetic_all_reduce_g4.txt"))
    sizes = [8 << k for k in range(28)]  # 8 B .. 1 GiB, -f 2
    assert [r.size_bytes for r in rep.rows] == [s for s in sizes for _ in (0, 1)]
    assert [r.count for r in rep.rows[::2]] == [s // 4 for s in sizes]
    assert [r.in_place for r in rep.rows] == [False, True] * 28
    assert {(r.dtype, r.redop, r.root, r.wrong, r.cputime, r.timestamp, r.iter_min_us) for r in rep.rows} == {
        ("float", "sum", -1, 0, False, None, None)
    }

    first_oop, first_ip = halves(rep, 8)
    assert numbers(first_oop) == (10.24, 0.0, 0.0, 0)
    assert numbers(first_ip) == (10.15, 0.0, 0.0, 0)
    assert numbers(halves(rep, 2097152)[0]) == (28.67, 73.15, 109.73, 0)
    assert numbers(halves(rep, 2097152)[1]) == (28.10, 74.63, 111.94, 0)
    last_oop, last_ip = halves(rep, 1 << 30)
    assert (last_oop.size_bytes, last_oop.count) == (1073741824, 268435456)
    assert numbers(last_oop) == (4780.71, 224.60, 336.90, 0)
    assert numbers(last_ip) == (4557.41, 235.60, 353.41, 0)
    # all_reduce busbw = algbw * 2(n-1)/n = 1.5 algbw with 4 ranks: a swapped column would break this
    for r in rep.rows:
        if r.algbw_gbps >= 1:
            assert r.busbw_gbps == pytest.approx(1.5 * r.algbw_gbps, abs=0.011)
            assert r.algbw_gbps == pytest.approx(r.size_bytes / 1e3 / r.time_us, rel=0.001, abs=0.0051)  # printed %.2f

    assert rep.program == "all_reduce_perf"
    assert rep.collective == "allreduce"
    assert rep.version == "2.19.6"
    assert rep.nccl_version == "2.28.9"
    assert (rep.nccl_version_code, rep.nccl_headers_code) == (22809, 22809)
    assert rep.devices == H200_DEVICES
    assert rep.config == {
        "nthreads": 1,
        "ngpus": 4,
        "minimum_bytes": 8,
        "maximum_bytes": 1073741824,
        "step_factor": 2,
        "warmup_iters": 1,
        "iterations": 20,
        "aggregated_iterations": 1,
        "validation": 1,
        "graph": 0,
        "unalign": 0,
    }
    assert (rep.out_of_bounds, rep.out_of_bounds_ok) == (0, True)
    assert rep.avg_busbw == 101.773
    assert rep.avg_busbw_ok is None  # NCCL_TESTS_MIN_BW not set: unchecked
    assert rep.errors == [] and rep.warnings == [] and rep.incomplete == []
    assert rep.last_nccl_error is None
    assert rep.concluded and not rep.truncated
    assert rep.wrong_total == 0
    assert rep.ok


def test_to_metric_and_metrics():
    rep = parse_stdout(text("synthetic_all_reduce_g4.txt"))
    oop, ip = halves(rep, 1 << 30)
    assert ip.to_metric("allreduce") == {
        "collective": "allreduce",
        "size_bytes": 1073741824,
        "count": 268435456,
        "dtype": "float",
        "redop": "sum",
        "root": -1,
        "in_place": True,
        "time_us": 4557.41,
        "algbw_gbps": 235.60,
        "busbw_gbps": 353.41,
        "wrong": 0,
        "source": "nccl-tests",
    }
    metrics = rep.metrics()
    assert len(metrics) == 56
    assert metrics[-1] == ip.to_metric("allreduce")
    assert {m["collective"] for m in metrics} == {"allreduce"}
    assert json.loads(json.dumps(metrics)) == metrics  # storable as row_json
    assert rep.metrics("my_allreduce")[0]["collective"] == "my_allreduce"
    with pytest.raises(ValueError):
        NcclTestsReport(rows=rep.rows).metrics()


# --------------------------------------------------------------------------- NCCL lines mixed in

_NCCL_INFO = re.compile(r"vm:\d+:\d+ \[\d\] NCCL INFO [^\n]*\n")
_NCCL_WARN = re.compile(r"\n\[[^\]]+\] vm:\d+:\d+ \[\d\] [^\n]* NCCL WARN [^\n]*")


def test_interleaved_and_spliced_nccl_lines():
    raw = text("synthetic_all_reduce_g4_info.txt")
    rep = parse_stdout(raw)
    sizes = [8 * 4**k for k in range(13)]  # 8 B .. 128 MiB, -f 4
    assert [r.size_bytes for r in rep.rows] == [s for s in sizes for _ in (0, 1)]
    # INFO lines spliced right after the preamble (the first timed collective connects the ring, -w 0)
    assert numbers(halves(rep, 8)[0]) == (27.29, 0.0, 0.0, 0)
    assert numbers(halves(rep, 8)[1]) == (10.18, 0.0, 0.0, 0)
    # ... between the out-of-place and in-place halves
    assert numbers(halves(rep, 2097152)[0]) == (28.11, 74.60, 111.91, 0)
    assert numbers(halves(rep, 2097152)[1]) == (27.81, 75.42, 113.12, 0)
    # ... and a WARN (leading newline + timestamp) after a preamble
    assert numbers(halves(rep, 8388608)[0]) == (71.92, 116.63, 174.95, 0)
    assert numbers(halves(rep, 8388608)[1]) == (68.02, 123.32, 184.98, 0)
    assert numbers(halves(rep, 134217728)[1]) == (887.94, 151.16, 226.73, 0)
    assert rep.warnings == [
        "[2025-11-22 08:21:47] vm:40213:40230 [0] proxy.cc:1687 (proxyServiceInitOp) NCCL WARN "
        "[Service thread] Accept failed Resource temporarily unavailable"
    ]
    assert rep.last_nccl_error == "[Service thread] Accept failed Resource temporarily unavailable"
    assert rep.config["warmup_iters"] == 0 and rep.config["step_factor"] == 4
    assert rep.devices == H200_DEVICES
    assert rep.avg_busbw == 61.0599
    assert rep.errors == [] and rep.incomplete == []
    assert rep.ok  # a benign WARN and "# error:" do not fail the run

    # the same rows as the text with every NCCL line cut out (fragments re-joined)
    clean = _NCCL_INFO.sub("", _NCCL_WARN.sub("", raw))
    assert "NCCL" not in clean
    assert parse_stdout(clean).rows == rep.rows


def test_nccl_lines_between_every_line():
    raw = text("synthetic_all_reduce_g4.txt")
    noisy = "".join(
        line + "vm:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n" for line in raw.splitlines(keepends=True)
    )
    assert parse_stdout(noisy).rows == parse_stdout(raw).rows


# --------------------------------------------------------------------------- -c 0, -I 1, -C 1 -S 1, hypercube


def test_alltoall_without_check_has_no_wrong_counts():
    rep = parse_stdout(text("synthetic_alltoall_c0.txt"))
    assert rep.collective == "alltoall"
    assert [r.size_bytes for r in rep.rows[::2]] == [1048576, 4194304, 16777216, 67108864]
    # alltoall's count column is the per-peer count: size / 4 ranks / 4 bytes
    assert [r.count for r in rep.rows[::2]] == [65536, 262144, 1048576, 4194304]
    assert {(r.redop, r.root, r.wrong) for r in rep.rows} == {("none", -1, None)}
    assert numbers(halves(rep, 1048576)[0]) == (14.78, 70.93, 53.20, None)
    assert numbers(halves(rep, 67108864)[1]) == (382.10, 175.63, 131.72, None)
    assert rep.config["validation"] == 0
    assert rep.wrong_total == 0
    assert rep.rows[0].to_metric("alltoall")["wrong"] is None
    assert rep.ok


def test_per_iteration_columns():
    rep = parse_stdout(text("synthetic_all_gather_I1.txt"))
    assert rep.collective == "allgather"
    assert rep.config["per_iter_timing"] is True and rep.config["iterations"] == 200
    assert len(rep.rows) == 10
    oop, ip = halves(rep, 1048576)
    assert numbers(oop) == (17.91, 58.56, 43.92, 0)
    assert (oop.iter_min_us, oop.iter_max_us, oop.iter_p99_us, oop.iter_cv_pct) == (16.97, 23.09, 21.41, 1.52)
    assert numbers(ip) == (17.87, 58.66, 44.00, 0)
    assert (ip.iter_min_us, ip.iter_max_us, ip.iter_p99_us, ip.iter_cv_pct) == (16.27, 20.18, 18.36, 1.22)
    last_ip = halves(rep, 16777216)[1]
    assert (last_ip.time_us, last_ip.iter_min_us, last_ip.iter_max_us, last_ip.iter_p99_us, last_ip.iter_cv_pct) == (
        108.54,
        99.23,
        133.83,
        112.15,
        3.03,
    )
    metric = oop.to_metric("allgather")
    assert (metric["iter_min_us"], metric["iter_max_us"], metric["iter_p99_us"], metric["iter_cv_pct"]) == (16.97, 23.09, 21.41, 1.52)
    assert rep.ok


def test_cputime_and_timestamp_columns_and_roots():
    rep = parse_stdout(text("synthetic_broadcast_C1_S1.txt"))
    assert rep.collective == "broadcast"
    assert len(rep.rows) == 24
    assert [r.root for r in rep.rows[::2]] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert all(r.cputime for r in rep.rows)
    oop, ip = halves(rep, 67108864, root=0)
    assert numbers(oop) == (463.00, 144.94, 144.94, 0)
    assert numbers(ip) == (470.90, 142.51, 142.51, 0)
    assert oop.timestamp == ip.timestamp == "2025-11-22 08:30:11"
    oop3 = halves(rep, 268435456, root=3)[0]
    assert (oop3.time_us, oop3.timestamp) == (1826.83, "2025-11-22 08:30:22")
    metric = ip.to_metric("broadcast")
    assert metric["time_kind"] == "cputime" and metric["timestamp"] == "2025-11-22 08:30:11"
    assert rep.ok


def test_hypercube_empty_redop():
    rep = parse_stdout(text("synthetic_hypercube.txt"))
    assert rep.collective == "hypercube"
    assert [(r.size_bytes, r.count, r.redop, r.root) for r in rep.rows[::2]] == [
        (1048576, 65536, "", -1),
        (2097152, 131072, "", -1),
        (4194304, 262144, "", -1),
    ]
    assert numbers(halves(rep, 4194304)[1]) == (68.59, 45.86, 45.86, 0)
    assert rep.ok


# --------------------------------------------------------------------------- failures


def test_wrong_results_and_out_of_bounds_failed():
    rep = parse_stdout(text("synthetic_all_reduce_wrong.txt"))
    assert [r.wrong for r in rep.rows] == [0, 0, 0, 0, 0, 1024, 0, 0, 4, 0, 0, 0, 0, 16777200]  # %6g: 1.67772e+07
    assert rep.wrong_total == 16778228
    assert numbers(halves(rep, 16777216)[0]) == (13608.5, 1.23, 1.85, 4)  # %.1f once %.2f is too wide
    assert numbers(halves(rep, 67108864)[1]) == (53665.0, 1.25, 1.88, 16777200)
    assert (rep.out_of_bounds, rep.out_of_bounds_ok) == (3, False)
    assert rep.avg_busbw == 1.78246
    assert rep.errors == [".. vm pid 41002: Test failure common.cu:1454"]
    assert rep.concluded
    assert not rep.ok


def test_nccl_failure_spliced_into_the_first_row():
    rep = parse_stdout(text("synthetic_all_reduce_nccl_failure.txt"))
    assert rep.rows == []
    assert rep.incomplete == [{"size_bytes": 8, "count": 2, "dtype": "float", "redop": "sum", "root": -1}]
    assert rep.errors == [
        "vm: Test NCCL failure common.cu:619 'invalid usage (run with NCCL_DEBUG=WARN for details) / Error : no "
        "algorithm/protocol available for function AllReduce with datatype ncclFloat32. NCCL_ALGO was set to CollNetDirect.'",
        ".. vm pid 51877: Test failure common.cu:702",
        ".. vm pid 51877: Test failure common.cu:939",
        ".. vm pid 51877: Test failure all_reduce.cu:574",
        ".. vm pid 51877: Test failure common.cu:972",
        ".. vm pid 51877: Test failure common.cu:1768",
        ".. vm pid 51877: Test failure common.cu:1454",
    ]
    assert rep.out_of_bounds is None and rep.out_of_bounds_ok is None and rep.avg_busbw is None
    assert not rep.concluded
    assert rep.collective == "allreduce" and rep.devices[0]["pid"] == 51877
    assert not rep.ok


def test_cuda_failure_and_timeout_lines():
    out = (
        "#  Rank  0 Group  0 Pid  40213 on         vm device  0 [0000:00:06] NVIDIA H200\n"
        "vm: Test CUDA failure common.cu:1636 'out of memory'\n"
        "     1048576        262144     float     sum      -1vm: Test timeout (30s) common.cu:526\n"
        " .. vm pid 40213: Test failure common.cu:623\n"
    )
    rep = parse_stdout(out)
    assert rep.errors == [
        "vm: Test CUDA failure common.cu:1636 'out of memory'",
        "vm: Test timeout (30s) common.cu:526",
        ".. vm pid 40213: Test failure common.cu:623",
    ]
    assert rep.incomplete == [{"size_bytes": 1048576, "count": 262144, "dtype": "float", "redop": "sum", "root": -1}]
    assert not rep.ok


def test_min_bw_check_failed():
    out = text("synthetic_all_reduce_g4.txt").replace("# Avg bus bandwidth    : 101.773 ", "# Avg bus bandwidth    : 101.773 FAILED")
    rep = parse_stdout(out)
    assert rep.avg_busbw == 101.773 and rep.avg_busbw_ok is False
    assert not rep.ok
    ok = parse_stdout(out.replace("101.773 FAILED", "101.773 OK"))
    assert ok.avg_busbw_ok is True and ok.ok


# --------------------------------------------------------------------------- truncation, corruption


def test_truncated_inside_a_row():
    full = text("synthetic_all_reduce_g4.txt")
    start = full.index("     1048576        262144")
    rep = parse_stdout(full[: start + 70])  # cut inside the out-of-place half
    assert rep.rows == parse_stdout(full).rows[:34]  # 17 complete lines: 8 B .. 512 KiB
    assert rep.incomplete == [{"size_bytes": 1048576, "count": 262144, "dtype": "float", "redop": "sum", "root": -1}]
    assert rep.truncated and not rep.concluded
    assert rep.out_of_bounds is None
    assert not rep.ok


def test_partial_last_line_never_yields_a_row():
    full = text("synthetic_all_reduce_g4.txt")
    end = full.index("\n", full.index("     1048576        262144"))
    # the whole line but its last digit: every field is there, yet "0" of #wrong may have been "0..."
    assert len(parse_stdout(full[:end]).rows) == 34
    assert len(parse_stdout(full[: end - 1]).rows) == 34
    assert len(parse_stdout(full[: end + 1]).rows) == 36  # with its newline it is complete


@pytest.mark.parametrize("name", ["synthetic_all_reduce_wrong.txt", "synthetic_all_reduce_g4_info.txt", "synthetic_all_gather_I1.txt"])
def test_every_cut_gives_a_prefix_of_the_rows(name):
    full = text(name)
    rows = parse_stdout(full).rows
    for cut in range(0, len(full), 3):
        got = parse_stdout(full[:cut]).rows
        assert got == rows[: len(got)], cut


def test_a_row_with_a_missing_column_is_dropped_not_shifted():
    full = text("synthetic_all_reduce_g4.txt")
    good = "     2097152        524288     float     sum      -1    28.67   73.15  109.73       0    28.10   74.63  111.94       0"
    bad = "     2097152        524288     float     sum      -1    28.67  109.73       0    28.10   74.63  111.94       0"
    assert good in full
    rep = parse_stdout(full.replace(good, bad))
    assert len(rep.rows) == 54
    assert 2097152 not in {r.size_bytes for r in rep.rows}
    assert rep.incomplete == [{"size_bytes": 2097152, "count": 524288, "dtype": "float", "redop": "sum", "root": -1}]
    assert not rep.ok


def test_respaced_rows_still_parse():
    line = "     2097152        524288     float     sum      -1    28.67   73.15  109.73       0    28.10   74.63  111.94       0\n"
    rep = parse_stdout(line.replace("  ", "\t"))
    assert [numbers(r) for r in rep.rows] == [(28.67, 73.15, 109.73, 0), (28.10, 74.63, 111.94, 0)]


# --------------------------------------------------------------------------- several outputs, launchers


def test_concatenated_outputs_keep_every_row():
    g4 = text("synthetic_all_reduce_g4.txt")
    wrong = text("synthetic_all_reduce_wrong.txt")
    rep = parse_stdout(g4 + wrong)
    assert rep.rows == parse_stdout(g4).rows + parse_stdout(wrong).rows
    assert (rep.out_of_bounds, rep.out_of_bounds_ok) == (3, False)
    assert rep.avg_busbw == 1.78246  # the lowest
    assert len(rep.devices) == 8
    assert not rep.ok
    twice = parse_stdout(g4 + g4)
    assert len(twice.rows) == 112 and twice.rows[:56] == twice.rows[56:]  # no de-duplication
    assert twice.ok


@pytest.mark.parametrize("prefix", ["[1,0]<stdout>:", "0: "])
def test_launcher_line_prefixes(prefix):
    raw = text("synthetic_all_reduce_g4.txt")
    tagged = "".join(prefix + line for line in raw.splitlines(keepends=True))
    rep = parse_stdout(tagged)
    assert rep.rows == parse_stdout(raw).rows
    assert rep.version == "2.19.6" and rep.ok
    assert looks_like_nccl_tests(tagged)


def test_rows_without_header_and_collective_argument():
    raw = text("synthetic_all_gather_I1.txt")
    rows_only = "".join(line for line in raw.splitlines(keepends=True) if not line.startswith("#"))
    rep = parse_stdout(rows_only)
    assert rep.rows == parse_stdout(raw).rows  # -I 1 columns recognised without the header
    assert rep.collective is None and rep.out_of_bounds_ok is None and not rep.ok
    assert parse_stdout(rows_only, collective="all_gather_perf").collective == "allgather"
    assert parse_stdout(rows_only, collective="allgather").collective == "allgather"
    # the program named in the text wins over the argument
    assert parse_stdout(raw, collective="alltoall_perf").collective == "allgather"


def test_collective_names():
    assert COLLECTIVE_OF_BINARY["all_reduce_perf"] == "allreduce"
    assert collective_of("./build/all_reduce_perf") == "allreduce"
    assert collective_of("/opt/nccl-tests/build/sendrecv_perf_mpi") == "sendrecv"
    assert collective_of("reduce_scatter_perf") == "reduce_scatter"
    assert collective_of("alltoallv_perf") == "alltoallv"
    assert collective_of("python") is None
    assert decode_nccl_version(22809) == "2.28.9" and decode_nccl_version(2708) == "2.7.8"


def test_looks_like_nccl_tests():
    for path in sorted(DATA.glob("synthetic_*")):
        assert looks_like_nccl_tests(path.read_text()), path.name
    logs = Path(__file__).parent / "data"
    assert not looks_like_nccl_tests((logs / "nccl_logs" / "h200_1x4_info_rank0.log").read_text())
    assert not looks_like_nccl_tests((logs / "h200" / "tree_simple_rank0.json").read_text())
    assert not looks_like_nccl_tests("")


def test_garbage_does_not_raise():
    rep = parse_stdout("\x00\x01 # size count\n#\n\n   12  x\n" * 3)
    assert rep.rows == [] and not rep.ok


# --------------------------------------------------------------------------- -J JSON


def test_json_every_field():
    rep = parse_json(text("synthetic_all_reduce_g4.json"))
    assert rep.program == "all_reduce_perf" and rep.collective == "allreduce"
    assert rep.version is None  # the JSON does not carry the nccl-tests version
    assert rep.nccl_version == "2.28.9" and rep.nccl_version_code == 22809
    assert [r.size_bytes for r in rep.rows] == [s for s in (1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20) for _ in (0, 1)]
    oop, ip = halves(rep, 1 << 20)
    assert (oop.count, oop.dtype, oop.redop, oop.root) == (262144, "float", "sum", -1)
    assert numbers(oop) == (21.051109, 49.810962, 74.716443, 0)
    assert numbers(ip) == (20.796343, 50.421174, 75.631760, 0)
    assert numbers(halves(rep, 16 << 20)[0]) == (122.855937, 136.560075, 204.840112, 0)
    assert rep.devices == [
        {"rank": 0, "group": 0, "pid": 41234, "host": "vm", "device": 0, "busid": "0000:00:06", "name": "NVIDIA H200"}
    ]
    assert rep.config == {
        "nthreads": 1,
        "ngpus": 4,
        "minimum_bytes": 1048576,
        "maximum_bytes": 16777216,
        "step_factor": 2,
        "warmup_iters": 1,
        "iterations": 20,
        "aggregated_iterations": 1,
        "validation": 1,
        "graph": 0,
        "blocking_collectives": False,
        "per_iter_timing": False,
        "per_iter_skip": 0,
        "parallel_init": False,
    }
    assert (rep.out_of_bounds, rep.out_of_bounds_ok) == (0, True)
    assert rep.avg_busbw == 143.68705 and rep.avg_busbw_ok is None
    assert rep.last_nccl_error is None  # "errors":[""]
    assert rep.concluded and not rep.truncated
    assert rep.ok
    assert set(ip.to_metric("allreduce")) == set(parse_stdout(text("synthetic_all_reduce_g4.txt")).rows[0].to_metric("x"))


def test_json_per_iteration_and_unchecked():
    rep = parse_json(text("synthetic_all_gather_I1_c0.json"))
    assert rep.collective == "allgather"
    assert rep.config["per_iter_timing"] is True and rep.config["validation"] == 0
    oop, ip = halves(rep, 8388608)
    assert (oop.count, oop.redop) == (524288, "none")
    assert numbers(oop) == (61.476013, 136.453352, 102.340014, None)
    assert (oop.iter_min_us, oop.iter_max_us, oop.iter_p99_us, oop.iter_cv_pct) == (56.971108, 76.77084, 76.77084, 10.852232)
    assert (ip.iter_min_us, ip.iter_cv_pct) == (62.05082, 8.078507)
    assert rep.wrong_total == 0 and rep.ok


def test_json_truncated_by_a_crash_is_repaired():
    full = text("synthetic_all_reduce_g4.json")
    cut = full.index('{"size":8388608')
    rep = parse_json(full[: cut + 60])  # inside the 8 MiB row object
    assert rep.truncated
    assert rep.rows == parse_json(full).rows[:6]
    assert rep.out_of_bounds is None and not rep.concluded and not rep.ok


def test_json_of_a_failed_run():
    # on failure nccl-tests closes whatever is open: the row lacks its halves, no footer
    full = text("synthetic_all_reduce_g4.json")
    cut = full.index(',"out_of_place"', full.index('{"size":4194304'))
    rep = parse_json(full[:cut] + "}]}")
    assert not rep.truncated
    assert len(rep.rows) == 4
    assert rep.incomplete == [{"size_bytes": 4194304, "count": 1048576, "dtype": "float", "redop": "sum", "root": -1}]
    assert not rep.ok


def test_json_bare_inf_and_nan():
    full = text("synthetic_all_reduce_g4.json")
    mangled = full.replace('"alg_bw":49.810962', '"alg_bw":inf', 1).replace('"bus_bw":74.716443', '"bus_bw":"nan"', 1)
    row = parse_json(mangled).rows[0]
    assert row.algbw_gbps == math.inf and math.isnan(row.busbw_gbps)


def test_json_rejects_non_json():
    with pytest.raises(ValueError):
        parse_json("# nccl-tests version 2.19.6\n")
