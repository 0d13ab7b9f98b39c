"""MPICH / Cray PALS mpiexec: golden argv; a fake mpiexec on PATH stands in for PALS at the subprocess boundary."""

import pytest

from envmatrix.errors import ConfigError
from envmatrix.launchers import get_launcher
from envmatrix.planning import Grid, plan_runs
from envmatrix.probes import get_probe
from launcher_contract import contract_class, fixed_key, check_golden, golden_ctx, install_fake, plan_record, weird_setup


def _plan(grid, **opts):
    run = plan_runs([weird_setup()], [grid], get_probe("builtin").spec({"timeout_s": 60}), "gloo", "mpiexec")[0]
    run = fixed_key(run)
    return type(get_launcher("mpiexec"))(python="/opt/py/bin/python", as_root=False, options=opts).build(run, golden_ctx())


def test_hydra_flavor_uses_genv_pairs():
    plan = _plan(Grid(2, 2), flavor="hydra", hosts=["x1001", "x1002"])
    argv = plan.processes[0].argv
    i = argv.index("NCCL_ALGO")
    assert argv[i - 1] == "-genv" and argv[i + 1] == "Tree" and argv[argv.index("-hosts") + 1] == "x1001,x1002"
    check_golden("mpiexec_hydra_2x2_hosts", plan_record(plan))


def test_pals_real_nodes_ppn():
    argv = _plan(Grid(2, 4), hosts=["x1001", "x1002"]).processes[0].argv
    assert argv[:5] == ("mpiexec", "-n", "8", "--ppn", "4") and "--env" in argv and "NCCL_ALGO=Tree" in argv


def test_unknown_flavor_and_option_are_one_line_config_errors():
    with pytest.raises(ConfigError, match="allowed: pals, hydra"):
        _plan(Grid(1, 2), flavor="openmpi")
    with pytest.raises(ConfigError, match="did you mean no_export"):
        _plan(Grid(1, 2), no_exprt=["X"])


def test_fake_dropping_a_variable_is_caught(tmp_path):
    """A launcher that loses a variable on the way (the srun+pmix bug) yields env_mismatch, not a pass."""
    import os
    import uuid

    from envmatrix.env import Atom, Setup

    install_fake(tmp_path / "bin", "mpiexec")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "FAKE_LAUNCHER_DROP": "NCCL_NET_GDR_LEVEL",
           "ENVMATRIX_TEST_MARKER": uuid.uuid4().hex}
    contract = contract_class("mpiexec")()
    setup = Setup("gdr", (Atom("NCCL_NET_GDR_LEVEL", value="PHB"), Atom("NCCL_ALGO", value="Ring")))
    result = contract.run_command(tmp_path, env, Grid(2, 2), "pass", setup)
    assert result.outcome == "env_mismatch"
    assert result.root_cause["line"] == "NCCL_NET_GDR_LEVEL missing on ranks 0-3"
