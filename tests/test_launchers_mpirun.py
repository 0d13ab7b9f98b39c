"""OpenMPI mpirun: golden argv, and real mpirun (Debian's openmpi-bin) for delivery, timeout, exit codes."""

import json
import os
import shutil
import sys

import pytest

from conftest import assert_no_processes, write_conf
from envmatrix.env import Atom, Setup
from envmatrix.errors import ConfigError
from envmatrix.launchers import get_launcher
from envmatrix.planning import Grid, plan_runs
from envmatrix.probes import get_probe
from launcher_contract import fixed_key, check_golden, golden_ctx, plan_record, weird_setup

needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="OpenMPI mpirun not installed (.ci/run installs openmpi-bin)")


def _run(grid, **opts):
    run = plan_runs([weird_setup()], [grid], get_probe("builtin").spec({"timeout_s": 60}), "gloo", "mpirun")[0]
    run = fixed_key(run)
    cls = type(get_launcher("mpirun"))
    return cls(python="/opt/py/bin/python", **opts).build(run, golden_ctx())


def test_real_nodes_golden_uses_ppr_and_hosts():
    plan = _run(Grid(2, 2), as_root=True, options={"hosts": ["node01", "node02"], "no_export": ["NCCL_IB_HCA"]})
    argv = plan.processes[0].argv
    assert argv[argv.index("--map-by") + 1] == "ppr:2:node" and "--allow-run-as-root" in argv
    assert "--oversubscribe" not in argv and not any(a.startswith("NCCL_IB_HCA=") for a in argv)
    assert "MASTER_ADDR=node01" in argv and not any(a.startswith("NCCL_HOSTID=") for a in argv)
    check_golden("mpirun_2x2_hosts", plan_record(plan))


def test_real_nodes_unbind_ranks_unless_the_user_binds():
    # OpenMPI's default for np <= 2 pins a rank and NCCL's proxy/socket threads to one core (a host bisect's pairs)
    argv = _run(Grid(2, 1), options={"hosts": ["node01", "node02"]}).processes[0].argv
    assert argv[argv.index("--bind-to") + 1] == "none"
    for user in (["--bind-to", "numa"], ["--bind-to=core"], ["-bind-to", "socket"]):
        argv = _run(Grid(2, 1), options={"hosts": ["node01", "node02"], "extra_args": user}).processes[0].argv
        assert [a for a in argv if a.lstrip("-").startswith("bind-to")] == [user[0]] and "none" not in argv
    argv = _run(Grid(2, 1), options={"hosts": ["node01", "node02"], "hostfile": "/h/hosts"}).processes[0].argv
    assert argv[argv.index("--bind-to") + 1] == "none"
    emulated = _run(Grid(2, 1), options={"extra_args": ["--bind-to", "numa"]}).processes[0].argv
    assert [a for a in emulated if a == "--bind-to"] == ["--bind-to"] and "none" not in emulated


def test_a_hostfile_alone_names_the_nodes(tmp_path, monkeypatch):
    # docs/clusters.md: launcher_opts.mpirun.hostfile=hosts.txt runs a 2x4 on the file's hosts as
    # --hostfile FILE --map-by ppr:4:node; without hosts: it ran every rank on localhost (emulated) instead.
    # mpirun starts in the run's directory, so a relative path is made absolute (it was passed as written)
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text("node01 slots=4\nnode02 slots=4\n")
    monkeypatch.chdir(tmp_path)
    argv = _run(Grid(2, 4), options={"hostfile": "hosts.txt"}).processes[0].argv
    assert argv[argv.index("--hostfile") + 1] == str(hostfile) and argv[argv.index("--map-by") + 1] == "ppr:4:node"
    assert "--oversubscribe" not in argv and "MASTER_ADDR=node01" in argv and "ENVMATRIX_EMULATE=0" in argv
    (tmp_path / "bad.txt").write_text("node01 slots=x\n")
    with pytest.raises(ConfigError, match="bad.txt:1"):
        _run(Grid(2, 1), options={"hostfile": str(tmp_path / "bad.txt")})
    with pytest.raises(ConfigError, match="launcher_opts.mpirun.hostfile"):
        _run(Grid(2, 1), options={"hostfile": str(tmp_path / "missing.txt")})


def test_emulated_nodes_oversubscribe_on_one_host():
    argv = _run(Grid(2, 2), as_root=False).processes[0].argv
    assert argv[:3] == ("mpirun", "-np", "4") and "--oversubscribe" in argv and "--allow-run-as-root" not in argv
    assert "ENVMATRIX_EMULATE=1" in argv and "ENVMATRIX_UNSET=NCCL_DEBUG" in argv


CONF = """
name: mpirun_gloo
backend: gloo
launcher: mpirun
grids: [1x2, 2x2]
setups:
  tree: {NCCL_ALGO: Tree, TORCH_DISTRIBUTED_DEBUG: DETAIL}
probe: {timeout_s: 90, collectives: [allreduce]}
"""


@pytest.mark.slow
@needs_mpirun
def test_cli_sweep_with_real_mpirun_gloo(cli, tmp_path):
    conf = write_conf(tmp_path / "m.yaml", CONF)
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr + done.stdout
    data = json.loads((tmp_path / "o" / "results.json").read_text())
    assert data["matrix"] == {"1x2": {"tree": "1"}, "2x2": {"tree": "1"}}, data["results"][0]["root_cause"]
    two = next(r for r in data["results"] if r["grid"] == "2x2")
    assert {r["env"]["NCCL_HOSTID"] for r in two["ranks"]} == {"envmatrix-node0", "envmatrix-node1"}
    assert all(r["env"]["NCCL_ALGO"] == "Tree" and r["checks"] for r in two["ranks"])
    # the exact launch is recorded with the result: one mpirun for all 4 ranks, the setup's variable passed with -x
    (argv,) = two["argv"]
    assert os.path.basename(argv[0]) == "mpirun" and argv[argv.index("-np") + 1] == "4"
    assert argv[argv.index("NCCL_ALGO=Tree") - 1] == "-x"
    assert_no_processes(cli.marker)


@pytest.mark.slow
@needs_mpirun
def test_cli_sweep_not_exported_variable_is_an_env_mismatch(cli, tmp_path):
    conf = write_conf(tmp_path / "m.yaml", CONF.replace("[1x2, 2x2]", "[2x2]") + "launcher_opts: {mpirun: {no_export: [NCCL_ALGO]}}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"), "--fail-on-failure")
    assert done.returncode == 1, done.stderr + done.stdout
    (result,) = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    assert result["outcome"] == "env_mismatch"
    assert result["root_cause"]["line"] == "NCCL_ALGO missing on ranks 0-3"
    assert "env_mismatch" in (tmp_path / "o" / "matrix.md").read_text()
    assert_no_processes(cli.marker)


@pytest.mark.slow
@needs_mpirun
def test_search_trials_go_through_the_configured_launcher(cli, tmp_path):
    """search uses launcher_opts like sweep does: a variable mpirun may not forward fails the trial."""
    import optuna

    from search_helpers import fake_conf, run_search

    conf = fake_conf(tmp_path / "s.yaml", forbid=False, extra="launcher: mpirun\nlauncher_opts: {mpirun: {no_export: [NCCL_ALGO]}}\n")
    conf.write_text(conf.read_text().replace("trials: 12", "trials: 1").replace("NCCL_ALGO: [Ring, Tree]", "NCCL_ALGO: [Ring]"))
    done = run_search(cli, "search", f"conf={conf}", "search.baseline=false", "search.max_failure_rate=1.0", "--out", str(tmp_path / "o"))
    assert done.returncode == 1, done.stdout + done.stderr  # every trial failed: failures found (9ccc254)
    study = optuna.load_study(study_name="fake", storage=f"sqlite:///{tmp_path / 'o' / 'study.sqlite'}")
    (trial,) = [t for t in study.trials if t.state.name != "PRUNED"]
    assert trial.state.name == "FAIL"
    assert trial.user_attrs["failure_class"] == "env_mismatch"
    assert trial.user_attrs["root_cause"] == "1x1: NCCL_ALGO missing on rank 0"
