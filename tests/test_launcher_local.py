"""The local launcher's plan is pure: argv/env per rank, emulated nodes, pins."""

import sys

from envmatrix.env import Atom, Setup
from envmatrix.launchers import LaunchContext, get_launcher
from envmatrix.planning import Grid, ProbeSpec, plan_runs


def _plan(grid, backend="nccl", atoms=(), pins=None, inherited=None):
    run = plan_runs([Setup("s", tuple(atoms))], [grid], ProbeSpec.make("builtin", {"timeout_s": 5}), backend, "local")[0]
    ctx = LaunchContext(
        workdir="/tmp/w",
        inherited_env=inherited or {"PATH": "/bin", "NCCL_NVLS_ENABLE": "0"},
        pins=pins or {"NCCL_NVLS_ENABLE": "0"},
        rank_argv=(sys.executable, "-m", "envmatrix.rank.main"),
        probe_env={"ENVMATRIX_PROBE": "{}"},
        port=12345,
        gpus=4,
    )
    return get_launcher("local").build(run, ctx)


def test_one_process_per_rank_with_identity():
    plan = _plan(Grid(2, 2))
    assert len(plan.processes) == 4
    envs = [p.env for p in plan.processes]
    assert [e["RANK"] for e in envs] == ["0", "1", "2", "3"]
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "1", "0", "1"]
    assert {e["WORLD_SIZE"] for e in envs} == {"4"} and {e["MASTER_PORT"] for e in envs} == {"12345"}
    assert {e["MASTER_ADDR"] for e in envs} == {"127.0.0.1"}
    assert [e["ENVMATRIX_DEVICE"] for e in envs] == ["0", "1", "2", "3"]
    assert all(p.argv == (sys.executable, "-m", "envmatrix.rank.main") for p in plan.processes)


def test_emulated_nodes_get_their_own_hostid():
    hostids = [p.env["NCCL_HOSTID"] for p in _plan(Grid(2, 2)).processes]
    assert hostids == ["envmatrix-node0", "envmatrix-node0", "envmatrix-node1", "envmatrix-node1"]
    assert all("NCCL_HOSTID" not in p.env for p in _plan(Grid(1, 4)).processes)


def test_setup_env_applied_and_pins_win():
    plan = _plan(Grid(1, 2), atoms=[Atom("NCCL_ALGO", value="Ring"), Atom("NCCL_NVLS_ENABLE", value="1")])
    for env in plan.intended_env:
        assert env["NCCL_ALGO"] == "Ring" and env["NCCL_NVLS_ENABLE"] == "0"
        assert env["NCCL_SOCKET_IFNAME"] == "lo" and env["PATH"] == "/bin"


def test_setup_may_override_loopback_default():
    plan = _plan(Grid(1, 2), backend="gloo", atoms=[Atom("GLOO_SOCKET_IFNAME", value="eth7")])
    assert {p.env["GLOO_SOCKET_IFNAME"] for p in plan.processes} == {"eth7"}
    assert all("ENVMATRIX_DEVICE" not in p.env for p in plan.processes)
