"""QA of envmatrix bench on a one-rank grid (1x1), with a real gloo rank."""

import sqlite3

import pytest

pytestmark = pytest.mark.slow


def test_point_to_point_asked_on_one_rank_is_warned_not_silently_dropped(cli, tmp_path):
    # the rank skips sendrecv and p2p without a peer; the run said nothing and looked like a clean pass of all three
    out = tmp_path / "b"
    done = cli.run("bench", "backend=gloo", "--grid", "1x1", "-b", "64", "-e", "64", "-n", "1", "-w", "0",
                   "-c", "allreduce,sendrecv,p2p", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warnings == ["envmatrix: warning: sendrecv, p2p need two ranks; grid 1x1 has one: not measured"], done.stderr
    with sqlite3.connect(out / "results.sqlite") as db:
        # one rank: nccl-tests' factor 2(n-1)/n makes allreduce's busbw 0, its algbw is not
        ((collective, algbw, busbw, wrong),) = db.execute("SELECT collective, algbw_gbps, busbw_gbps, wrong FROM metrics")
    assert (collective, busbw, wrong) == ("allreduce", 0.0, 0) and algbw > 0
