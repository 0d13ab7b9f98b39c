import json

import pytest

from envmatrix.catalog import load_catalog
from envmatrix.env.hermetic import hermetic_environment

from conftest import write_conf


def test_system_conf_variables_are_pinned_to_catalog_defaults():
    conf = [
        {"path": "/home/u/.nccl.conf", "variables": {"NCCL_DEBUG": "INFO"}},
        {"path": "/etc/nccl.conf", "variables": {"NCCL_BUFFSIZE": "1048576", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_CROSS_NIC": "0"}},
    ]
    env, facts = hermetic_environment({"PATH": "/bin", "NCCL_CROSS_NIC": "1"}, conf, load_catalog())
    assert env["NCCL_CONF_FILE"] == "/dev/null" and env["PATH"] == "/bin"
    assert env["NCCL_BUFFSIZE"] == "4194304"  # NCCL's default, not the file's 1 MiB
    assert env["NCCL_CROSS_NIC"] == "1"  # the caller's explicit value still wins
    assert "NCCL_SOCKET_IFNAME" not in env and facts["not_neutralisable"] == ["NCCL_SOCKET_IFNAME"]
    assert facts["pinned_to_defaults"] == {"NCCL_BUFFSIZE": "4194304"}
    assert "NCCL_DEBUG" not in env  # the per-user file is hidden by NCCL_CONF_FILE=/dev/null instead


@pytest.mark.slow
def test_hermetic_sweep_reports_and_hides_the_user_conf(cli, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text("NCCL_DEBUG=INFO\n")
    cli.env["HOME"] = str(home)
    conf = write_conf(tmp_path / "h.yaml", "backend: gloo\ngrids: [1x1]\nhermetic: true\nsetups: {a: {}}\nprobe: {timeout_s: 60, collectives: [allreduce]}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    (result,) = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    assert result["ranks"][0]["env"]["NCCL_CONF_FILE"] == "/dev/null"
    assert {"path": str(home / ".nccl.conf"), "variables": {"NCCL_DEBUG": "INFO"}} in result["host"]["nccl_conf_files"]
    assert result["host"]["hermetic"]["NCCL_CONF_FILE"] == "/dev/null"
