"""QA of envmatrix bench --no-check (nccl-tests -c 0) with real gloo ranks: unchecked values are N/A, never 0."""

import sqlite3

import pytest

pytestmark = pytest.mark.slow


def test_no_check_reports_wrong_as_not_available_like_nccl_tests_c0(cli, tmp_path):
    # the ranks sent wrong=None; the driver summed None as 0, so the table claimed "#wrong 0" for values never checked
    out = tmp_path / "b"
    done = cli.run("bench", "backend=gloo", "--grid", "1x2", "-b", "64", "-e", "64", "-n", "1", "-w", "0", "--no-check",
                   "-c", "allreduce,alltoall", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(out / "results.sqlite") as db:
        assert db.execute("SELECT collective, wrong FROM metrics").fetchall() == [("allreduce", None), ("alltoall", None)]
    (report,) = out.glob("bench_*.md")
    rows = [line for line in report.read_text().splitlines() if line.startswith("| 64 |")]
    assert len(rows) == 2 and all(row.endswith("| N/A |") for row in rows), rows
