"""p2p reports the receiver's time, as seed 000 does ("the results are from the recv side") and the pair tests do:
the mean of sender and receiver counted the blocking send's return, which comes once the bytes are handed to the
transport, and put small sizes under a shaped link's floor."""

import json
import sqlite3

import pytest

pytestmark = pytest.mark.slow


def test_p2p_row_is_the_receivers_on_two_emulated_nodes(cli, tmp_path):
    out = tmp_path / "b"
    done = cli.run("bench", "backend=gloo", "--grid", "2x2", "-b", "4K", "-e", "64K", "-f", "16", "-n", "3", "-w", "1",
                   "-c", "p2p", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(out / "results.sqlite") as db:
        rows = [json.loads(r) for (r,) in db.execute("SELECT row_json FROM metrics WHERE collective = 'p2p'")]
    assert len(rows) == 2
    for row in rows:
        # rank 0 sends to the next node's first rank (rank 2 on 2x2), which alone reports
        assert row["ranks_reporting"] == 1 and row["wrong"] == 0, row
