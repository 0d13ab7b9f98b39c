"""bench --pairs hosts under mpirun with no hosts: (every rank on this host, --grid Nx1): the tools were pointed at
the table's labels node0, node1, ..., which resolve nowhere, so every iperf3 cell said "unable to connect to server:
Name or service not known" after each round waited out the server (~70 s a round; 4x1 took minutes). Ranks that
all ran on one host reach each other at 127.0.0.1, as the local launcher's do."""

import shutil

import pytest

from conftest import assert_no_processes


@pytest.mark.slow
def test_mpirun_pairs_on_one_host_reach_each_other_with_iperf3(cli, tmp_path):
    if shutil.which("mpirun") is None or shutil.which("iperf3") is None:
        pytest.skip("mpirun or iperf3 not installed")
    out = tmp_path / "run"
    done = cli.run("bench", "backend=gloo", "launcher=mpirun", "--grid", "2x1", "--pairs", "hosts", "--pair-size", "64K",
                   "-n", "3", "-w", "1", "--iperf-seconds", "1", "--pair-tolerance", "0.95", "--out", str(out),
                   timeout=50)  # a round waiting out an unreachable iperf3 server took longer than this alone
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in (out / "pairs_hosts.md").read_text().splitlines()
            if ln.startswith("| node")]
    assert len(rows) == 2 and all(float(r[7]) > 0 for r in rows), rows  # the iperf3 column: a figure per pair
    assert_no_processes(cli.marker)
