"""bench --pairs hosts, the same command again (resume after Ctrl-C): the stored rounds are not measured again.

With the local launcher each round's iperf3 port was 20000 + pid % 20000, and the port is part of the round's run
key, so every new process missed every stored round: 5x1 interrupted after 2 of its 5 rounds, run again twice,
held 12 netpair runs for 5 rounds. The port now comes from the run directory, which the command holds
exclusively. (The start line's "N already in the store" counts the p2p run only, as Steps says: the rounds' keys
are known once it ends; so the test counts the stored runs.)"""

import re
import sqlite3

import pytest

from conftest import assert_no_processes


@pytest.mark.slow
def test_same_pairs_hosts_command_again_measures_nothing_again(cli, tmp_path):
    out = tmp_path / "run"
    argv = ("bench", "backend=gloo", "--pairs", "hosts", "--grid", "2x1", "--pair-size", "16K", "-n", "2", "-w", "1",
            "--iperf-seconds", "1", "--pair-tolerance", "0.95", "--out", str(out))
    first = cli.run(*argv, timeout=300)
    assert first.returncode in (0, 1), first.stdout[-3000:] + first.stderr[-3000:]
    again = cli.run(*argv, timeout=300)
    assert again.returncode == first.returncode, again.stdout[-3000:] + again.stderr[-3000:]
    assert not re.search(r"^\[\d+/\d+\]", again.stdout + again.stderr, re.M), again.stdout[-3000:]  # no run measured again
    with sqlite3.connect(out / "results.sqlite") as db:
        assert db.execute("select count(*) from results").fetchone()[0] == 2  # the p2p run and the one round
    assert_no_processes(cli.marker)
