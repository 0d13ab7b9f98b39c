"""torchrun from the installed torch: golden argv and real agents (c10d rendezvous on loopback)."""

import pytest

from envmatrix.errors import PlanError
from envmatrix.launchers import get_launcher
from envmatrix.planning import Grid, plan_runs
from envmatrix.probes import get_probe
from launcher_contract import fixed_key, LauncherContract, golden_ctx, weird_setup


class TestTorchrunContract(LauncherContract):
    launcher_name = "torchrun"
    keeps_exit_codes = False  # torchrun exits 1 whatever its workers returned
    maps_signals = False  # torchrun reports any failed worker as exit 1 (its ChildFailedError report has the signal)
    identity_env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"}


def test_one_agent_per_emulated_node_and_no_multi_host():
    run = plan_runs([weird_setup()], [Grid(2, 2)], get_probe("builtin").spec({}), "gloo", "torchrun")[0]
    cls = type(get_launcher("torchrun"))
    plan = cls(python="/opt/py/bin/python", as_root=False).build(run, golden_ctx())
    assert len(plan.processes) == 2 and plan.process_of_rank == (0, 0, 1, 1)
    assert "--rdzv-endpoint=127.0.0.1:29555" in plan.processes[0].argv
    with pytest.raises(PlanError, match="this host only"):
        cls(python="/p", as_root=False, options={"hosts": ["a", "b"]}).build(run, golden_ctx())
