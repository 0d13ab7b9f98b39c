"""Real nccl-tests 2.19.6 output recorded on the 4xH200 box, and nccl-tests as a command probe."""

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from envmatrix.parsers.nccl_tests import parse_json, parse_stdout

from conftest import write_conf

DATA = Path(__file__).parent / "data" / "nccl_tests"


def test_recorded_allreduce_g4_rows():
    report = parse_stdout((DATA / "h200_all_reduce_g4.txt").read_text())
    assert report.collective == "allreduce" and report.version == "2.19.6" and report.nccl_version == "2.28.9"
    assert report.ok and report.out_of_bounds == 0 and report.avg_busbw == pytest.approx(337.306)
    out = [r for r in report.rows if not r.in_place]
    assert [(r.size_bytes, r.busbw_gbps) for r in out] == [(67108864, 313.89), (268435456, 341.38), (1073741824, 356.60)]
    assert out[0].count == 16777216 and out[0].time_us == 320.70 and out[0].wrong == 0 and out[0].redop == "sum"


def test_recorded_json_matches_stdout():
    js = parse_json((DATA / "h200_all_reduce_g4.json").read_text())
    txt = parse_stdout((DATA / "h200_all_reduce_g4.txt").read_text())
    assert [round(r.busbw_gbps, 2) for r in js.rows] == [r.busbw_gbps for r in txt.rows]
    assert js.nccl_version == "2.28.9"


def test_recorded_c0_iter_stats_failure_and_socket_runs():
    c0 = parse_stdout((DATA / "h200_all_reduce_c0.txt").read_text())
    assert all(r.wrong is None for r in c0.rows) and c0.rows[0].size_bytes == 8
    i1 = parse_stdout((DATA / "h200_alltoall_I1.txt").read_text())
    assert i1.rows[2].size_bytes == 64 and i1.rows[2].iter_min_us == 45.15 and i1.rows[2].iter_cv_pct == 8.80
    fail = parse_stdout((DATA / "h200_all_reduce_fail_collnet.txt").read_text())
    assert not fail.ok and not fail.rows and "Test NCCL failure" in fail.errors[0] and "invalid usage" in fail.errors[0]
    socket = parse_stdout((DATA / "h200_all_reduce_mpi_2x2.txt").read_text())
    assert [r.busbw_gbps for r in socket.rows if not r.in_place] == [4.84, 4.60, 4.21]


def _replay_conf(tmp_path, setups):
    lines = "\n".join(f"  {name}: {{ENVMATRIX_REPLAY: {file}, ENVMATRIX_REPLAY_RC: '{rc}'}}" for name, (file, rc) in setups.items())
    code = "import os, sys; sys.stdout.write(open(os.environ['ENVMATRIX_REPLAY']).read()); sys.exit(int(os.environ['ENVMATRIX_REPLAY_RC']))"
    return write_conf(
        tmp_path / "replay.yaml",
        f"""
backend: gloo
grids: [1x1]
setups:
{lines}
probe:
  name: command
  timeout_s: 30
  command: [{sys.executable}, -c, "{code}"]
""",
    )


@pytest.mark.slow
def test_command_probe_parses_nccl_tests_output(cli, tmp_path):
    conf = _replay_conf(
        tmp_path,
        {
            "good": (DATA / "h200_all_reduce_g4.txt", 0),
            "wrong": (DATA / "synthetic_all_reduce_wrong.txt", 0),
            "collnet": (DATA / "h200_all_reduce_fail_collnet.txt", 3),
        },
    )
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"), "--allow-unknown-vars")
    assert done.returncode == 1, done.stderr  # the wrong and collnet cells failed
    results = {r["setup"]["name"]: r for r in json.loads((tmp_path / "o" / "results.json").read_text())["results"]}
    assert results["good"]["outcome"] == "pass" and len(results["good"]["metrics"]) == 6
    assert results["good"]["metrics"][0]["source"] == "nccl-tests"
    assert results["wrong"]["outcome"] == "wrong_result" and "wrong elements" in results["wrong"]["root_cause"]["line"]
    assert results["collnet"]["outcome"] == "collective_error" and "invalid usage" in results["collnet"]["root_cause"]["line"]
    with sqlite3.connect(tmp_path / "o" / "results.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM metrics WHERE busbw_gbps = 356.6").fetchone()[0] == 1
