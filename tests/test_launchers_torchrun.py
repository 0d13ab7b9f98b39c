"""torchrun specifics (the contract, golden argv and real agents: tests/contracts/test_launcher_contract.py)."""

import pytest

from envmatrix.errors import PlanError
from envmatrix.launchers import get_launcher
from envmatrix.planning import Grid, plan_runs
from envmatrix.probes import get_probe
from launcher_contract import golden_ctx, weird_setup


def test_one_agent_per_emulated_node_and_no_multi_host():
    run = plan_runs([weird_setup()], [Grid(2, 2)], get_probe("builtin").spec({}), "gloo", "torchrun")[0]
    cls = type(get_launcher("torchrun"))
    plan = cls(python="/opt/py/bin/python", as_root=False).build(run, golden_ctx())
    assert len(plan.processes) == 2 and plan.process_of_rank == (0, 0, 1, 1)
    assert "--rdzv-endpoint=127.0.0.1:29555" in plan.processes[0].argv
    with pytest.raises(PlanError, match="this host only"):
        cls(python="/p", as_root=False, options={"hosts": ["a", "b"]}).build(run, golden_ctx())
