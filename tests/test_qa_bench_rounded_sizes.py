"""QA of envmatrix bench: swept sizes that nccl-tests' rounding makes equal, with real gloo ranks on 5 ranks."""

import sqlite3

import pytest

pytestmark = pytest.mark.slow


def test_sizes_rounding_to_one_count_are_one_measurement_per_rank(cli, tmp_path):
    # int32 on 5 ranks: -b 1 -i 30 sweeps 1, 31, 61 B; reduce_scatter keeps whole elements per rank, so 1 B (rounded
    # up to one element each) and 31 B (7 elements -> 5) are both 20 B. Each rank measured both, and the driver
    # averaged the two windows into one row that said 10 ranks reported on a 5-rank grid.
    out = tmp_path / "b"
    done = cli.run("bench", "backend=gloo", "--grid", "1x5", "-b", "1", "-e", "64", "-i", "30", "-n", "1", "-w", "0",
                   "-d", "int32", "-c", "reduce_scatter", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(out / "results.sqlite") as db:
        rows = db.execute("SELECT size_bytes, json_extract(row_json, '$.count'), json_extract(row_json, "
                          "'$.ranks_reporting'), wrong FROM metrics ORDER BY size_bytes").fetchall()
    assert rows == [(20, 1, 5, 0), (60, 3, 5, 0)]
