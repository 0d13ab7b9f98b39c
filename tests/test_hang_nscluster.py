"""Hang diagnosis and rank identity on the namespace cluster (tests/cluster_fixture.py): a real mpirun
reaches each emulated host through plm_rsh_agent; the stack request travels mpirun -> orted -> shim -> probe."""

from __future__ import annotations

import json

import pytest
import yaml

from cluster_fixture import ns_cluster  # noqa: F401  (fixture)
from conftest import assert_no_processes

pytestmark = pytest.mark.slow


def _sweep(cli, cluster, tmp_path, **fields):
    conf = tmp_path / "c.yaml"
    conf.write_text(yaml.safe_dump(cluster.conf(**fields)))
    proc = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "run"), timeout=240)
    (result,) = json.loads((tmp_path / "run" / "results.json").read_text())["results"]
    return proc, result


def test_stalled_rank_on_a_remote_host_is_named_with_its_host(ns_cluster, cli, tmp_path):
    cluster = ns_cluster(4)
    probe = {"timeout_s": 30, "collectives": ["allreduce", "allgather"], "stall": {"rank": 2, "seq": 2}}
    proc, result = _sweep(cli, cluster, tmp_path, grids=["4x1"], probe=probe)
    assert proc.returncode == 1 and result["outcome"] == "timeout", proc.stdout[-2000:]
    line = result["root_cause"]["line"]
    assert line.startswith("rank 2 on host node2 stuck outside any collective at rank/main.py:"), line
    assert line.endswith("in stall_here, before allgather (seq 2); ranks 0-1,3 wait in allgather (seq 2)"), line
    assert [r["hostname"] for r in result["ranks"]] == ["node0", "node1", "node2", "node3"]
    assert all(r["nic"] == "eth0" and r["gpu_uuid"] == "cpu" for r in result["ranks"]), [r["nic"] for r in result["ranks"]]
    assert "in all_gather" in result["hang"]["ranks"]["3"]["stack"]
    assert_no_processes(cli.marker)
    assert cluster.processes() == []


def test_stopped_rank_is_named_as_not_answering(ns_cluster, cli, tmp_path):
    cluster = ns_cluster(2)
    cluster.hang("node1")  # SIGSTOP: the rank cannot run any handler, its peer answers from the rendezvous
    proc, result = _sweep(cli, cluster, tmp_path, grids=["2x1"], probe={"timeout_s": 20})
    assert proc.returncode == 1 and result["outcome"] == "timeout", proc.stdout[-2000:]
    line = result["root_cause"]["line"]
    assert line.startswith("rank 1 on host node1 did not answer the stack request"), line
    assert line.endswith("rank 0 wait in init_process_group (rendezvous)"), line
    assert result["hang"]["ranks"]["0"]["stack"]
    assert_no_processes(cli.marker)
    assert cluster.processes() == []
