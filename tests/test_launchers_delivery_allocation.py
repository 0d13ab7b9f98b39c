"""Pure parts: env-delivery comparison, Slurm/PBS allocation parsing, batch scripts (golden)."""

import sys
from pathlib import Path

import pytest

from envmatrix.errors import ConfigError, PlanError
from envmatrix.launchers.allocation import Allocation, check_grids, detect, expand_nodelist, parse_gpu_count
from envmatrix.launchers.submit import BatchSpec, parse_job_id, render
from envmatrix.planning import Grid
from envmatrix.boundary import env_digest
from envmatrix.probes.delivery import delivery_problem
from envmatrix.results import compress_ranks
from launcher_contract import GOLDEN, REGOLD


def test_compress_ranks():
    assert compress_ranks([7, 0, 1, 2, 5, 8]) == "0-2,5,7-8" and compress_ranks([3]) == "3"


def _shim(env, checked=()):
    return {"env": env, "checked": list(checked), "sha256": env_digest(env)}


def test_missing_and_wrong_values_are_precise_and_grouped():
    intended = [{"NCCL_NET_GDR_LEVEL": "PHB", "NCCL_ALGO": "Tree", "RANK": str(r)} for r in range(8)]
    shim = {r: _shim({"NCCL_ALGO": "Ring" if r < 2 else "Tree", "RANK": str(r),
                      **({"NCCL_NET_GDR_LEVEL": "PHB"} if r < 4 else {})}) for r in range(8)}
    line, first = delivery_problem(intended, ["NCCL_NET_GDR_LEVEL", "NCCL_ALGO", "RANK"], shim, {}, require_reports=True)
    assert line == "NCCL_NET_GDR_LEVEL missing on ranks 4-7; NCCL_ALGO=Tree expected, Ring seen on ranks 0-1"
    assert first == 4


def test_unset_var_seen_and_missing_reports_and_corruption():
    intended = [{"X": "1"}, {"X": "1"}]
    seen = {0: {**_shim({"X": "1", "NCCL_DEBUG": "INFO"}), "checked": ["X"]}}
    line, _ = delivery_problem(intended, ["X", "NCCL_DEBUG"], seen, {}, require_reports=True)
    assert line == "no env report on rank 1 (the launcher shim did not run there or ENVMATRIX_RESULT_DIR was not delivered); " \
                   "NCCL_DEBUG set to 'INFO' on rank 0 but the setup unsets it"
    bad = {0: {"env": {"X": "1"}, "checked": ["X"], "sha256": "0" * 64}}
    assert "digest" in delivery_problem(intended[:1], ["X"], bad, {}, False)[0]


def test_names_outside_the_echo_are_only_judged_when_checked():
    intended = [{"SITE_VAR": "a"}]
    assert delivery_problem(intended, ["SITE_VAR"], {}, {0: {"NCCL_X": "1"}}, False) == (None, None)
    assert delivery_problem(intended, ["SITE_VAR"], {0: _shim({}, ["SITE_VAR"])}, {}, False)[0] == "SITE_VAR missing on rank 0"


@pytest.mark.parametrize("text, hosts", [
    ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
    ("a1,b[9-10]-ib", ["a1", "b9-ib", "b10-ib"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("x1000c0s0b0n0", ["x1000c0s0b0n0"]),
])
def test_expand_nodelist(text, hosts):
    assert expand_nodelist(text) == hosts


def test_bad_nodelist_is_one_line():
    with pytest.raises(ConfigError, match="unbalanced"):
        expand_nodelist("node[01-03")


@pytest.mark.parametrize("text, n", [("4", 4), ("gpu:4", 4), ("gpu:a100:8", 8), ("4(x2)", 4), ("0,1,2", 3), ("", None)])
def test_gpu_counts(text, n):
    assert parse_gpu_count(text) == n


def test_detect_slurm_and_pbs():
    slurm = detect({"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "2", "SLURM_GPUS_PER_NODE": "gpu:4"})
    assert slurm == Allocation("slurm", "9", ("n1", "n2"), 4)
    pbs = detect({"PBS_JOBID": "12.polaris", "PBS_NODEFILE": "/f"}, read_text=lambda p: "x1\nx1\nx2\n")
    assert pbs.nodes == ("x1", "x2") and pbs.label == "PBS job 12.polaris"
    assert detect({"HOME": "/"}) is None
    with pytest.raises(ConfigError, match="expands to 2 hosts but SLURM_JOB_NUM_NODES=3"):
        detect({"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "3"})


def test_check_grids_against_allocation():
    alloc = Allocation("slurm", "9", ("n1", "n2"), 4)
    check_grids([Grid(2, 4), Grid(1, 2)], "nccl", alloc)
    with pytest.raises(PlanError, match=r"grids: 2x8 needs 8 GPUs per node but Slurm job 9 has 4"):
        check_grids([Grid(2, 8)], "nccl", alloc)
    with pytest.raises(PlanError, match="emulated on one node needs 8 GPUs"):
        check_grids([Grid(2, 4)], "nccl", Allocation("slurm", "9", ("n1",), 4), emulate=True)



NO_JOB = {"PATH": "/usr/bin"}
SLURM_2 = {"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "2", "SLURM_GPUS_ON_NODE": "4"}


@pytest.mark.parametrize("name,opts,hosts,env,node_hosts", [
    ("local", {}, (), NO_JOB, ()),  # the local launcher runs every rank here (hosts given to it: refused, below)
    ("mpirun", {}, (), NO_JOB, ()),
    ("mpirun", {}, ("a",), NO_JOB, ()),  # one host: nodes emulated there
    ("mpirun", {}, ("a", "b"), NO_JOB, ("a", "b")),
    ("mpirun", {"emulate": True}, ("a", "b"), NO_JOB, ()),
    ("mpirun", {"hosts": ["c", "d", "e"]}, ("a", "b"), NO_JOB, ("c", "d", "e")),
    ("mpiexec", {"flavor": "hydra"}, ("a", "b"), NO_JOB, ("a", "b")),
    ("srun", {}, (), SLURM_2, ("n1", "n2")),
])
def test_node_hosts_say_where_the_nodes_run(name, opts, hosts, env, node_hosts):
    """What check_fits is told (resolve.check_grids_fit): the same hosts and emulation the launch layout uses."""
    from envmatrix.launchers import configure_launcher

    assert configure_launcher(name, opts, hosts, environ=env).node_hosts(env) == node_hosts


def test_hosts_given_to_the_local_launcher_are_refused_not_ignored():
    from envmatrix.errors import ConfigError
    from envmatrix.launchers import configure_launcher

    with pytest.raises(ConfigError, match=r"hosts: a, b: launcher 'local' starts every rank on this machine and reads no hosts"):
        configure_launcher("local", {}, ("a", "b"), environ=NO_JOB)


def test_allocation_checks_grids_known_after_configuring():
    from envmatrix.launchers import configure_launcher

    launcher = configure_launcher("srun", {}, (), environ=SLURM_2)
    launcher.check_allocation([Grid(2, 4)], "nccl", SLURM_2)
    with pytest.raises(PlanError, match="grids: 3x1 needs 3 nodes but Slurm job 9 has 2"):
        launcher.check_allocation([Grid(3, 1)], "nccl", SLURM_2)

SPEC = dict(envmatrix_args=("sweep", "conf=my conf.yaml", "grids=[1x4,2x2]", "launcher=srun"), python="/opt/py/bin/python",
            workdir="/home/u/runs dir", nodes=2, ntasks_per_node=4, gpus_per_node=4, time="00:30:00", job_name="envmx",
            account="proj1", queue="debug", directives=("--exclusive",))


@pytest.mark.parametrize("scheduler", ["slurm", "pbs"])
def test_batch_scripts_golden(scheduler):
    text = render(BatchSpec(scheduler=scheduler, output="envmx.out", **SPEC))
    path = GOLDEN / f"submit_{scheduler}.sh"
    if REGOLD or not path.exists():
        path.write_text(text)
        assert REGOLD, f"{path} was missing and has been written; check it in"
    assert path.read_text() == text, f"{path.name} changed; if intended regenerate with: ENVMATRIX_REGOLD=1 python -m pytest -q {__file__}"
    assert "'conf=my conf.yaml'" in text and "cd '/home/u/runs dir'" in text


def test_batch_script_input_errors():
    with pytest.raises(ConfigError, match="allowed: sweep, bisect, search"):
        render(BatchSpec(scheduler="slurm", envmatrix_args=("bench",), python="p", workdir="/"))
    with pytest.raises(ConfigError, match="--time"):
        render(BatchSpec(scheduler="slurm", envmatrix_args=("sweep",), python="p", workdir="/", time="soon"))


def test_parse_job_ids():
    assert parse_job_id("slurm", "Submitted batch job 4242\n") == "4242"
    assert parse_job_id("pbs", "123456.polaris-pbs-01\n") == "123456.polaris-pbs-01"


def test_submit_print_through_cli_parser(capsys):
    import argparse

    from envmatrix.cli.submit import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["submit", "--nodes", "2", "--print", "--", "sweep", "conf=aws_ofi", "launcher=srun"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "#SBATCH --nodes=2" in out and f"{sys.executable} -m envmatrix sweep conf=aws_ofi launcher=srun" in out
