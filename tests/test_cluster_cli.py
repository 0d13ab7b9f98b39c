"""``envmatrix cluster up|down|list``: a user without a cluster gets N emulated hosts, and the config lines it
prints run a real multi-host gloo sweep through mpirun; the library's clusters of dead owners are removed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest
import yaml

from cluster_fixture import unavailable_reason
from envmatrix.cluster import registry
from envmatrix.network import links, state

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    root = tmp_path / "state"
    monkeypatch.setenv(state.STATE_ENV, str(root))
    return root


@pytest.fixture
def name(state_dir, cli):
    made = f"t{uuid.uuid4().hex[:8]}"
    yield made
    cli.run("cluster", "down", "--all")  # whatever a failing test left


@pytest.mark.slow
def test_cluster_up_prints_config_lines_that_run_a_three_host_sweep_and_down_removes_it(name, cli, tmp_path):
    up = cli.run("cluster", "up", "3", "--name", name)
    assert up.returncode == 0, up.stderr
    assert f"cluster {name}: 3 hosts" in up.stdout and "node2  10.231." in up.stdout
    listed = json.loads(cli.run("cluster", "list", "--json").stdout)
    assert [c["name"] for c in listed] == [name] and listed[0]["persistent"]
    view = listed[0]
    hostfile = open(view["hostfile"]).read()
    assert hostfile == "node0 slots=1\nnode1 slots=1\nnode2 slots=1\n"
    assert all(links.namespace_exists(ns) for ns in view["namespaces"].values())

    conf = yaml.safe_load(view["conf_snippet"])
    conf.update(name="on_cluster", backend="gloo", setups={"base": {}}, grids=["3x1"], probe={"timeout_s": 60})
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(conf))
    sweep = cli.run("sweep", f"conf={tmp_path / 'c.yaml'}", "--out", str(tmp_path / "run"), timeout=180)
    assert sweep.returncode == 0, sweep.stdout[-2000:] + sweep.stderr[-2000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())["results"]
    assert [r["outcome"] for r in results] == ["pass"]

    down = cli.run("cluster", "down", "--name", name)
    assert down.returncode == 0 and f"cluster {name}: removed" in down.stdout
    assert not any(links.namespace_exists(ns) for ns in view["namespaces"].values())
    assert not links.link_exists(None, view["bridge"])
    assert "no clusters" in cli.run("cluster", "list").stdout


@pytest.mark.slow
def test_bad_cluster_requests_exit_2_naming_what_is_allowed(name, cli):
    for args, says in [(("up", "0"), "hosts=0 not allowed; allowed: 1..200"),
                       (("up", "201"), "allowed: 1..200"),
                       (("up", "2", "--name", "a/b"), "--name 'a/b' not allowed"),
                       (("up", "2", "--slots", "0"), "--slots 0 not allowed"),
                       (("down", "--name", "nosuch"), "cluster 'nosuch': no such cluster")]:
        done = cli.run("cluster", *args)
        assert done.returncode == 2 and says in done.stderr, (args, done.stderr)
    assert cli.run("cluster", "up", "1", "--name", name).returncode == 0
    again = cli.run("cluster", "up", "1", "--name", name)
    assert again.returncode == 2 and f"a cluster named {name!r} exists already" in again.stderr
    assert "no clusters to remove" not in cli.run("cluster", "down").stdout  # the one cluster, without --name


@pytest.mark.slow
def test_a_cluster_whose_owner_was_killed_is_removed_by_the_next_one(state_dir):
    from envmatrix import cluster

    code = "from envmatrix import cluster\nc = cluster.up(2)\nprint(c.tag, flush=True)\nimport time; time.sleep(60)"
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    tag = owner.stdout.readline().strip()
    owner.kill()
    owner.wait()
    assert links.namespace_exists(f"emx{tag}h1") and registry.record_path(tag).exists()
    with cluster.up(1) as next_one:
        assert next_one.tag != tag
        assert not links.namespace_exists(f"emx{tag}h0") and not links.namespace_exists(f"emx{tag}h1")
        assert not registry.record_path(tag).exists()


@pytest.mark.slow
def test_a_command_on_an_emulated_host_sees_its_hostname_address_and_hosts_file(state_dir):
    from envmatrix import cluster
    from envmatrix.execution import netns, processes

    with cluster.up(2) as c:
        seen = processes.run_capture(c.argv_in("node1", ["sh", "-c", "hostname; cat /etc/hosts; cat /proc/net/dev"]))
        assert seen.returncode == 0, seen.stderr
        lines = seen.stdout.splitlines()
        assert lines[0] == "node1" and f"{c.addresses['node0']} node0" in lines and f"{c.addresses['node1']} node1" in lines
        assert "eth0:" in seen.stdout and c.veth("node1") not in seen.stdout  # its own links only
        assert processes.run_capture(["hostname"]).stdout.strip() != "node1"  # the host's name is untouched
        sleeper = processes.popen_piped(c.argv_in("node0", ["sleep", "30"]), env={"PATH": "/usr/bin:/bin"})
        try:
            for _ in range(100):
                if sleeper.pid in c.processes():
                    break
                time.sleep(0.05)
            assert sleeper.pid in c.processes()  # the entry point exec'd sleep in node0's namespace: the same pid
            assert netns.pids_in_netns(c.ns("node1")) == []
        finally:
            sleeper.kill()
            sleeper.wait()
    missing = processes.run_capture(netns.netns_argv("emxnosuchns", ["true"]))
    assert missing.returncode == 127 and "emxnosuchns" in missing.stderr
    usage = processes.run_capture([sys.executable, "-m", "envmatrix.execution.netns_enter", "x"])
    assert usage.returncode == 2 and "usage:" in usage.stderr
