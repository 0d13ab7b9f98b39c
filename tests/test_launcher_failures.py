"""Launcher-level failures get their own class and a root cause naming the host and the launcher's words.

Parser tests read mpirun output recorded on the namespace cluster (tests/data/launcher_failures/, made with
tests/cluster_fixture.py: a downed link, a host the agent cannot reach, too few slots); the srun and Hydra
lines are transcribed from those launchers' messages. The end-to-end test cuts one host's link on a real
4-host cluster and runs the real sweep.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from cluster_fixture import ns_cluster  # noqa: F401  (fixture)
from conftest import assert_no_processes
from envmatrix.launchers.failures import launcher_failure

DATA = Path(__file__).parent / "data" / "launcher_failures"


def recorded(name: str) -> str:
    return (DATA / name).read_text()


def test_a_daemon_that_cannot_connect_back_names_its_host_not_the_banner():
    failure = launcher_failure("mpirun", recorded("openmpi_link_down.txt"))
    assert failure.host == "node2"
    assert failure.line().startswith("mpirun failed on host node2: daemon on node2 could not open a TCP connection back to vm")
    assert "ORTE was unable to reliably start one or more daemons" in failure.line()
    assert "---" not in failure.line()


def test_an_unreachable_host_is_named_from_the_agents_message():
    failure = launcher_failure("mpirun", recorded("openmpi_unknown_host.txt"))
    assert failure.host == "nodeX" and "unknown host nodeX" in failure.message


def test_ssh_could_not_resolve_names_the_host():
    text = ("ssh: Could not resolve hostname gpu-017: Name or service not known\n" + "-" * 74 + "\n"
            "ORTE was unable to reliably start one or more daemons.\nThis usually is caused by:\n" + "-" * 74 + "\n")
    failure = launcher_failure("mpirun", text)
    assert failure.host == "gpu-017" and failure.message.startswith("ssh: Could not resolve hostname gpu-017")


def test_mpirun_refusing_for_lack_of_slots_is_a_launcher_failure_without_a_host():
    failure = launcher_failure("mpirun", recorded("openmpi_slots.txt"))
    assert failure.host is None and "not enough slots for the 4 ranks" in failure.message


def test_mpirun_with_every_node_filled_is_a_launcher_failure_not_its_banner():
    # recorded on the H200 box (OpenMPI 4.1.6): --host names of emulated hosts that mpirun counted as one node
    text = recorded("openmpi_nodes_filled_h200.txt")
    failure = launcher_failure("mpirun", text)
    assert failure.host is None and failure.message.startswith("All nodes which are allocated for this job are already filled.")
    assert "---" not in failure.line()


def test_a_hostfile_mpirun_cannot_open_is_named_not_ortes_internal_error_boilerplate():
    # recorded from this box's mpirun 4.1.4: the hostfile block is followed by "An internal error has occurred in
    # ORTE ... This is something that should be reported to the developers.", whose last line was the root cause
    failure = launcher_failure("mpirun", recorded("openmpi_hostfile_missing.txt"))
    assert failure.host is None
    assert failure.message.startswith("Open RTE was unable to open the hostfile: /tmp/hfx/gone.txt")
    assert "reported to the developers" not in failure.line() and "---" not in failure.line()


def test_a_bad_hostfile_parameter_names_the_file_and_the_parameter():
    banner = "-" * 74 + "\n"
    text = (banner + "Open RTE detected a bad parameter in the hostfile:\n    /h/hosts.txt\n"
            "The slots parameter is less than 0:\n    slots=-1\n" + banner + banner
            + "An internal error has occurred in ORTE:\n\n[[19381,0],0] FORCE-TERMINATE AT (null):1 - error "
            "../../../../../orte/mca/ras/base/ras_base_allocate.c(352)\n\n"
            "This is something that should be reported to the developers.\n" + banner)
    failure = launcher_failure("mpirun", text)
    assert failure.message == ("Open RTE detected a bad parameter in the hostfile: /h/hosts.txt "
                               "The slots parameter is less than 0: slots=-1")


def test_the_generic_root_cause_is_never_a_banner_line():
    from envmatrix.probes.rootcause import root_cause_line

    assert root_cause_line(recorded("openmpi_nodes_filled_h200.txt")) == "All nodes which are allocated for this job are already filled."
    assert root_cause_line("-" * 74 + "\n" + "=" * 20 + "\n") is None


@pytest.mark.parametrize("text, host, words", [
    ("srun: error: Task launch for StepId=12.0 failed on node n017: Communication connection failure\n", "n017", "Task launch"),
    ("srun: error: Unable to create step for job 12: Requested node configuration is not available\n", None, "Unable to create step"),
    ("srun: error: Nodes n3 are still not ready\nsrun: error: Something is wrong with the boot of the nodes.\n", "n3", "still not ready"),
])
def test_srun_launch_failures(text, host, words):
    failure = launcher_failure("srun", text)
    assert failure.host == host and words in failure.message


def test_a_rank_exiting_under_srun_is_not_a_launcher_failure():
    assert launcher_failure("srun", "srun: error: n2: task 1: Exited with exit code 1\n") is None
    assert launcher_failure("mpirun", "Traceback (most recent call last):\nRuntimeError: boom\n" + "-" * 70 + "\n") is None


def test_hydra_connect_failure_names_the_target_host():
    text = '[mpiexec@login1] HYDU_sock_connect (utils/sock/sock.c:145): unable to connect from "login1" to "x1000c0s1b0n0" (No route to host)\n'
    failure = launcher_failure("mpiexec", text)
    assert failure.host == "x1000c0s1b0n0" and "No route to host" in failure.message


@pytest.mark.slow
def test_a_cut_link_in_a_four_host_run_is_a_launcher_error_naming_the_host(ns_cluster, cli, tmp_path):
    cluster = ns_cluster(4)
    cluster.link_down("node2")
    conf = tmp_path / "c.yaml"
    conf.write_text(yaml.safe_dump(cluster.conf(grids=["4x1"])))
    proc = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "run"), timeout=180)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((tmp_path / "run" / "results.json").read_text())["results"][0]
    assert result["outcome"] == "launcher_error"
    assert result["root_cause"]["host"] == "node2"
    assert result["root_cause"]["line"].startswith("mpirun failed on host node2: daemon on node2 could not open a TCP connection")
    assert {r["outcome"] for r in result["ranks"]} == {"launcher_error"}
    assert "mpirun failed on host node2" in proc.stdout and "-----" not in result["root_cause"]["line"]
    assert_no_processes(cli.marker)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")
def test_a_hostfile_gone_at_launch_is_a_launcher_error_naming_it_with_the_real_mpirun(cli, tmp_path):
    # hosts: name the nodes, so the hostfile is not read at plan time; mpirun is the first to find it missing
    missing = tmp_path / "gone.txt"
    conf = tmp_path / "m.yaml"
    conf.write_text(yaml.safe_dump({
        "name": "hostfile_gone", "backend": "gloo", "launcher": "mpirun", "grids": ["2x1"], "setups": {"base": {}},
        "probe": {"timeout_s": 60, "collectives": ["allreduce"]},
        "launcher_opts": {"mpirun": {"hosts": ["localhost", "127.0.0.1"], "hostfile": str(missing)}}}))
    proc = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "run"), timeout=120)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((tmp_path / "run" / "results.json").read_text())["results"][0]
    assert result["outcome"] == "launcher_error"
    assert result["root_cause"]["line"].startswith(f"mpirun failed: Open RTE was unable to open the hostfile: {missing}")
    assert f"unable to open the hostfile: {missing}" in proc.stdout and "reported to the developers" not in proc.stdout
    assert_no_processes(cli.marker)


def test_a_grid_wider_than_the_hostfiles_slots_is_refused_before_anything_runs(cli, tmp_path):
    # mpirun --hostfile --map-by ppr:P:node refuses P above a host's slots= only at launch ('not enough slots'):
    # a launcher_error, exit 1 and a run dir, for what the hostfile said at plan time
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text("node0 slots=3\nnode1 slots=2\nnode2 slots=3\n")
    conf = tmp_path / "m.yaml"
    conf.write_text(yaml.safe_dump({
        "name": "slots", "backend": "gloo", "launcher": "mpirun", "grids": ["2x3"], "setups": {"base": {}},
        "probe": {"timeout_s": 60, "collectives": ["allreduce"]},
        "launcher_opts": {"mpirun": {"hostfile": str(hostfile)}}}))
    proc = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "run"), timeout=60)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        f"envmatrix: error: grids: 2x3 puts 3 ranks on node1 but launcher_opts.mpirun.hostfile {hostfile} gives it "
        "slots=2; allowed: grids with ppn <= 2 on 2 nodes"]
    assert not (tmp_path / "run").exists()
