import json
import sys
from pathlib import Path

import pytest

from envmatrix.execution.hostinfo import nccl_conf_files, parse_gpu_list, parse_nccl_conf, visible_count

from conftest import write_conf

LOGS = Path(__file__).parent / "data" / "nccl_logs"


def test_parse_gpu_list_and_visible_devices():
    text = "0, NVIDIA H200, 580.159.04, 00000000:00:06.0\n1, NVIDIA H200, 580.159.04, 00000000:00:07.0\n"
    gpus = parse_gpu_list(text)
    assert [g["name"] for g in gpus] == ["NVIDIA H200"] * 2 and gpus[1]["pci"] == "00000000:00:07.0"
    assert visible_count(4, {"CUDA_VISIBLE_DEVICES": "0,2"}) == 2
    assert visible_count(4, {"CUDA_VISIBLE_DEVICES": ""}) == 0 and visible_count(4, {}) == 4


def test_nccl_conf_files_are_reported(tmp_path):
    conf = tmp_path / "nccl.conf"
    conf.write_text("# site defaults\nNCCL_SOCKET_IFNAME=eth0\nNCCL_IB_HCA = mlx5_0 # trailing\n")
    assert parse_nccl_conf(conf.read_text()) == {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5_0"}
    found = nccl_conf_files({"NCCL_CONF_FILE": str(conf)})
    assert found[0] == {"path": str(conf), "variables": {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5_0"}}
    assert all(f["path"] == "/etc/nccl.conf" for f in nccl_conf_files({"HOME": str(tmp_path / "none")}))


def replay_conf(path, probe_key, then=""):
    """A 1x1 gloo sweep whose two setups replay recorded H200 NCCL logs (2x2, 1x4) through the command probe."""
    code = "import os, sys; sys.stderr.write(open(os.environ['ENVMATRIX_REPLAY']).read())" + then
    return write_conf(
        path,
        f"""
backend: gloo
grids: [1x1]
setups:
  emulated_2x2: {{ENVMATRIX_REPLAY: {LOGS / 'h200_2x2_info_rank0.log'}}}
  one_node: {{ENVMATRIX_REPLAY: {LOGS / 'h200_1x4_info_rank0.log'}}}
probe:
  name: command
  timeout_s: 30
  {probe_key}
  command: [{sys.executable}, -c, "{code}"]
""",
    )


@pytest.mark.slow
def test_transport_per_cell_from_nccl_log_and_debug_env(cli, tmp_path):
    conf = replay_conf(tmp_path / "t.yaml", "nccl_debug: info", then="; print(os.environ['NCCL_DEBUG'])")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"), "--allow-unknown-vars")
    assert done.returncode == 0, done.stderr
    results = {r["setup"]["name"]: r for r in json.loads((tmp_path / "o" / "results.json").read_text())["results"]}
    assert results["emulated_2x2"]["nccl"]["transport"] == "NET/Socket+P2P/CUMEM"
    assert results["one_node"]["nccl"]["transport"] == "P2P/CUMEM"
    assert results["one_node"]["nccl"]["nccl_version"] == "2.28.9+cuda13.0"
    assert "INFO" in results["one_node"]["ranks"][0]["log_tail"]
    md = (tmp_path / "o" / "matrix.md").read_text()
    assert "## Transport per cell" in md and "| 1x1 | NET/Socket+P2P/CUMEM | P2P/CUMEM |" in md


@pytest.mark.slow
def test_forbidden_transport_fails_the_probe(cli, tmp_path):
    conf = replay_conf(tmp_path / "p.yaml", "forbid_transport: [NET]")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"), "--allow-unknown-vars")
    assert done.returncode == 1, done.stderr  # the emulated_2x2 cell fails
    results = {r["setup"]["name"]: r for r in json.loads((tmp_path / "o" / "results.json").read_text())["results"]}
    assert results["one_node"]["outcome"] == "pass"
    assert results["emulated_2x2"]["outcome"] == "wrong_transport"
    assert results["emulated_2x2"]["root_cause"]["line"] == "forbidden transport used: NET/Socket x10 (forbid_transport: NET)"
