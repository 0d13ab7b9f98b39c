"""The namespace cluster (tests/cluster_fixture.py) is a real multi-host launch: a real mpirun reaches each
emulated host through the agent, ranks run under that host's hostname and address, and each fault is real."""

from __future__ import annotations

import glob
import json
import os
import subprocess

import pytest
import yaml

from cluster_fixture import ns_cluster  # noqa: F401  (fixture)
from conftest import assert_no_processes

pytestmark = pytest.mark.slow


def sweep(cli, cluster, tmp_path, out="run", **fields):
    conf = tmp_path / f"{out}.yaml"
    conf.write_text(yaml.safe_dump(cluster.conf(**fields)))
    proc = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / out), timeout=180)
    results = json.loads((tmp_path / out / "results.json").read_text())["results"] if (tmp_path / out / "results.json").exists() else []
    return proc, results


def rank_hosts(tmp_path, out="run"):
    """hostname and address each rank's shim saw, from the run's rank{R}.env.json files."""
    found = {}
    for path in glob.glob(str(tmp_path / out / "logs" / "*" / "*" / "rank*.env.json")):
        report = json.loads(open(path).read())
        found[report["rank"]] = report["host"]
    return found


def test_four_host_gloo_sweep_runs_one_rank_per_emulated_host(ns_cluster, cli, tmp_path):
    cluster = ns_cluster(4)
    proc, results = sweep(cli, cluster, tmp_path, grids=["4x1"])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [r["outcome"] for r in results] == ["pass"]
    assert rank_hosts(tmp_path) == {0: "node0", 1: "node1", 2: "node2", 3: "node3"}
    argv = results[0]["argv"][0]
    assert argv[0] == "mpirun" and "node0:1,node1:1,node2:1,node3:1" in argv  # the real multi-host launch line
    assert_no_processes(cli.marker)
    assert cluster.processes() == []


def test_each_host_has_its_own_address_and_reaches_the_others_over_the_bridge(ns_cluster):
    cluster = ns_cluster(3)
    for host in cluster.hosts:
        out = subprocess.run(["ip", "netns", "exec", cluster.ns(host), "unshare", "--uts", "sh", "-c",
                              f"hostname {host}; hostname; getent hosts {host}; ip -4 -o addr show eth0"],
                             capture_output=True, text=True, check=True).stdout
        assert out.splitlines()[0] == host and cluster.addresses[host] in out
    reach = subprocess.run(["ip", "netns", "exec", cluster.ns("node0"), "python3", "-c",
                            f"import socket; s=socket.create_connection(('{cluster.addresses['node2']}', 9), 2)"],
                           capture_output=True, text=True)
    assert "refused" in reach.stderr.lower()  # a RST from node2: the packet got there (nothing listens on 9)
    cluster.cut_pair("node0", "node2")
    cut = subprocess.run(["ip", "netns", "exec", cluster.ns("node0"), "python3", "-c",
                          f"import socket; s=socket.create_connection(('{cluster.addresses['node2']}', 9), 2)"],
                         capture_output=True, text=True)
    assert "refused" not in cut.stderr.lower() and cut.returncode != 0


def test_a_downed_link_fails_the_run_and_cleanup_leaves_nothing(ns_cluster, cli, tmp_path):
    cluster = ns_cluster(2)
    cluster.link_down("node1")
    proc, results = sweep(cli, cluster, tmp_path, grids=["2x1"])
    assert proc.returncode == 1 and results[0]["outcome"] != "pass"
    assert_no_processes(cli.marker)


def test_a_hanging_rank_times_out_and_nothing_is_left_behind(ns_cluster, cli, tmp_path):
    cluster = ns_cluster(2)
    cluster.hang("node1")
    proc, results = sweep(cli, cluster, tmp_path, grids=["2x1"], probe={"timeout_s": 8})
    assert proc.returncode == 1 and results[0]["outcome"] == "timeout", proc.stdout[-2000:]
    assert_no_processes(cli.marker)
    assert cluster.processes() == []


def test_a_rate_limited_link_is_slower(ns_cluster, cli, tmp_path):
    cluster = ns_cluster(2)
    probe = {"timeout_s": 60, "bench": {"collectives": ["allreduce"], "min_bytes": "256K", "max_bytes": "256K", "iters": 3, "warmup": 1}}
    _, fast = sweep(cli, cluster, tmp_path, out="fast", grids=["2x1"], probe=probe)
    cluster.rate_limit("node1", "4mbit")
    _, slow = sweep(cli, cluster, tmp_path, out="slow", grids=["2x1"], probe=probe)
    assert fast[0]["outcome"] == slow[0]["outcome"] == "pass"
    fast_bw, slow_bw = fast[0]["metrics"][0]["busbw_gbps"], slow[0]["metrics"][0]["busbw_gbps"]
    assert slow_bw < fast_bw / 10, (fast_bw, slow_bw)  # 4 Mbit/s is far below what a veth carries unshaped
