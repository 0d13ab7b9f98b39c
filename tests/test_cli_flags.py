"""Global flags on either side of the subcommand; cluster launchers refuse to start outside an allocation."""

import os
import re

import pytest

from conftest import write_conf
from envmatrix.cli import build_parser
from envmatrix.errors import ConfigError
from envmatrix.launchers import configure_launcher
from envmatrix.planning import Grid


@pytest.mark.parametrize("command", [["sweep"], ["bench"], ["bisect", "--failing", "1x2"], ["search"]])
def test_debug_is_accepted_after_the_subcommand(command):
    parser = build_parser()
    assert parser.parse_known_args([*command, "--debug"])[0].debug is True
    assert parser.parse_known_args(["--debug", *command])[0].debug is True
    assert parser.parse_known_args(command)[0].debug is False


def test_debug_after_subcommand_shows_the_traceback(cli, tmp_path):
    before = cli.run("sweep", "conf=/nonexistent/x.yaml")
    after = cli.run("sweep", "conf=/nonexistent/x.yaml", "--debug")
    assert before.returncode == after.returncode == 2
    assert "Traceback" not in before.stderr and "Traceback" in after.stderr
    assert "unrecognized arguments" not in after.stderr


def test_srun_outside_an_allocation_is_refused_up_front():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    with pytest.raises(ConfigError, match=r"launcher=srun: no allocation: run inside salloc/sbatch or pass"):
        configure_launcher("srun", {}, (), [Grid(1, 2)], "gloo", environ=env)
    assert configure_launcher("srun", {}, (), [Grid(1, 2)], "gloo", environ={**env, "SLURM_JOB_ID": "7",
                              "SLURM_JOB_NODELIST": "n1", "SLURM_JOB_NUM_NODES": "1"}).name == "srun"


def test_srun_sweep_outside_allocation_exits_2_and_writes_nothing(cli, tmp_path):
    for key in [k for k in cli.env if k.startswith("SLURM_")]:
        del cli.env[key]
    conf = write_conf(tmp_path / "s.yaml", "backend: gloo\nlauncher: srun\ngrids: [1x2]\nsetups: {a: {}}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "no allocation" in done.stderr, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_pals_mpiexec_outside_pbs_is_refused_hydra_with_hosts_is_not():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PBS_", "SLURM_"))}
    with pytest.raises(ConfigError, match=r"launcher=mpiexec: no allocation: run inside qsub.*PBS_JOBID is not set"):
        configure_launcher("mpiexec", {}, (), [Grid(1, 2)], "gloo", environ=env)
    hydra = configure_launcher("mpiexec", {"flavor": "hydra"}, ("h1", "h2"), [Grid(1, 2)], "gloo", environ=env)
    inside = configure_launcher("mpiexec", {}, (), [Grid(1, 2)], "gloo", environ={**env, "PBS_JOBID": "9.pbs"})
    assert hydra.name == inside.name == "mpiexec"


@pytest.mark.parametrize("override", ["launcher_opts.local.emulate_hosts=false",
                                      "launcher_opts.local.emulate_hosts={namespaces:true}",
                                      "++launcher_opts.local.emulate_hosts.namespaces=true",
                                      "launcher_opts={local:{emulate_hosts:false}}"])
def test_emulate_hosts_flag_with_an_override_of_the_same_option_is_refused(override):
    # the flag is appended as ++launcher_opts.local.emulate_hosts=true: it silently replaced the user's own answer
    from envmatrix.app.sweep import SweepRequest
    from envmatrix.cli.common import request_from

    args = build_parser().parse_args(["sweep", "--emulate-hosts", override])
    with pytest.raises(ConfigError, match=rf"^--emulate-hosts: given with the override {re.escape(override)}, two answers"):
        request_from(SweepRequest, args)
    assert request_from(SweepRequest, build_parser().parse_args(["sweep", "--emulate-hosts", "backend=gloo"])).overrides == (
        "backend=gloo", "++launcher_opts.local.emulate_hosts=true")
