"""Slurm srun: golden argv, a fake srun at the subprocess boundary, and a real one-node Slurm when it can start.

The real cluster (Debian's slurm-wlm + munge) is started by the fixture below with a minimal
slurm.conf in a temp dir (no cgroup plugins, proctrack/linuxproc, task/none, cons_tres, localhost)
and torn down after; without the binaries or root it is skipped (tests/data/slurm_attempt.md).
"""

import json
import subprocess

import pytest

from conftest import assert_no_processes, write_conf
from envmatrix.launchers import get_launcher
from envmatrix.planning import Grid, plan_runs
from envmatrix.probes import get_probe
from launcher_contract import fixed_key, check_golden, golden_ctx, plan_record, weird_setup
from slurm_cluster import slurm  # noqa: F401  (the real one-node Slurm fixture)


def _plan(grid, env=None, **opts):
    run = plan_runs([weird_setup()], [grid], get_probe("builtin").spec({"timeout_s": 60}), "gloo", "srun")[0]
    run = fixed_key(run)
    ctx = golden_ctx()
    if env:
        ctx = type(ctx)(**{**ctx.__dict__, "inherited_env": {**ctx.inherited_env, **env}})
    return type(get_launcher("srun"))(python="/opt/py/bin/python", as_root=False, options=opts).build(run, ctx)


def test_commas_travel_by_name_through_srun_env():
    plan = _plan(Grid(1, 2))
    (proc,) = plan.processes
    export = next(a for a in proc.argv if a.startswith("--export="))
    assert export.startswith("--export=ALL,") and ",NCCL_IB_HCA," in export + ","
    assert proc.env["NCCL_IB_HCA"] == "mlx5_0,mlx5_1" and "NCCL_ALGO" not in proc.env


def test_inside_allocation_uses_its_nodes():
    env = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_JOB_NUM_NODES": "2", "SLURM_GPUS_ON_NODE": "4"}
    plan = _plan(Grid(2, 2), env=env)
    argv = plan.processes[0].argv
    assert "--nodes=2" in argv and "--ntasks-per-node=2" in argv and "--nodelist=gpu01,gpu02" in argv
    assert "--overcommit" not in argv
    check_golden("srun_2x2_allocation", plan_record(plan))


def test_grid_larger_than_allocation_is_a_plan_error():
    from envmatrix.errors import PlanError

    env = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_JOB_NUM_NODES": "2"}
    with pytest.raises(PlanError, match=r"grids: 4x1 needs 4 nodes but Slurm job 77 has 2 \(gpu01,gpu02\)"):
        _plan(Grid(4, 1), env=env)


# ---------------------------------------------------------------------------- real one-node Slurm


SRUN_CONF = """
name: srun_gloo
backend: gloo
launcher: srun
grids: [2x2]
setups:
  tree: {NCCL_ALGO: Tree, NCCL_IB_HCA: "mlx5_0,mlx5_1"}
probe: {timeout_s: 90, collectives: [allreduce]}
"""


@pytest.mark.slow
@pytest.mark.xdist_group("slurm")  # one real Slurm (slurmctld, slurmd, munged) on this host at a time
def test_cli_sweep_with_real_slurm(slurm, cli, tmp_path):
    conf = write_conf(tmp_path / "s.yaml", SRUN_CONF)
    cli.env.update(SLURM_CONF=slurm["SLURM_CONF"])
    argv = ["salloc", "-N1", "-n4", "--overcommit", *cli.argv("sweep", f"conf={conf}", "--out", str(tmp_path / "o"), "--allow-ignored-vars")]
    done = subprocess.run(argv, cwd=tmp_path, env=cli.env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr + done.stdout
    (result,) = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    assert result["outcome"] == "pass", result["root_cause"]
    assert all(r["env"]["NCCL_IB_HCA"] == "mlx5_0,mlx5_1" for r in result["ranks"])
    assert json.loads(result["ranks"][0]["env"]["ENVMATRIX_SHIM_IDENTITY"])["family"] == "slurm"
    assert_no_processes(cli.marker)
