"""What the driver can check before launching it checks once, up front (issue 39 point 4): a probe binary not on
PATH, the mpi probe without mpi4py (exit 2, one line, nothing launched or written); and a resumed store's stored
failures come with the hint that --rerun runs them again."""

import os
import sys

import pytest

from conftest import write_conf

BLOCK_MPI4PY = """
import sys

class _NoMpi4py:
    # this interpreter without mpi4py, for the driver and every rank it starts
    def find_spec(self, name, path=None, target=None):
        if name == "mpi4py" or name.startswith("mpi4py."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoMpi4py())
"""


def _conf(tmp_path, probe):
    return write_conf(tmp_path / "c.yaml", f"backend: gloo\ngrids: [1x2]\nsetups:\n  a: {{}}\n  b: {{ENVMATRIX_X: '1'}}\nprobe: {probe}\n")


def test_a_probe_command_not_on_path_is_refused_before_any_run(cli, tmp_path):
    out = tmp_path / "o"
    done = cli.run("sweep", f"conf={_conf(tmp_path, '{name: command, command: [envmx_no_such_tool, -x]}')}",
                   "--out", str(out), "--allow-unknown-vars")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "probe.command" in line and "'envmx_no_such_tool'" in line and "not found on PATH" in line
    assert not out.exists()


@pytest.mark.parametrize("command", ["sweep", "bench"])
def test_a_launcher_program_not_here_is_refused_before_any_run(cli, tmp_path, command):
    # mpirun runs on this host whatever hosts its ranks use: a wrong binary was a launch_error stored per cell, exit 1
    out = tmp_path / "o"
    done = cli.run(command, f"conf={_conf(tmp_path, '{timeout_s: 30}')}", "launcher=mpirun",
                   "launcher_opts.mpirun.binary=/nonexistent/envmx-mpirun", "--out", str(out), "--allow-unknown-vars")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line == ("envmatrix: error: launcher_opts.mpirun.binary: '/nonexistent/envmx-mpirun' is not an executable file "
                    "or a program on PATH; allowed: the mpirun to start")
    assert not out.exists()


@pytest.mark.slow
def test_the_mpi_probe_without_mpi4py_is_refused_up_front_with_the_install_hint(cli, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK_MPI4PY)
    cli.env["PYTHONPATH"] = os.pathsep.join([str(site), cli.env.get("PYTHONPATH", "")])
    out = tmp_path / "o"
    done = cli.run("sweep", f"conf={_conf(tmp_path, '{name: mpi}')}", "--out", str(out), "--allow-unknown-vars")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "probe mpi" in line and "pip install 'envmatrix[mpi]'" in line
    assert not out.exists()


@pytest.mark.slow
def test_a_resumed_sweep_says_its_stored_failures_can_run_again_with_rerun(cli, tmp_path):
    conf = write_conf(tmp_path / "c.yaml", "backend: gloo\ngrids: [1x1]\nsetups:\n  ok: {}\n"
                      "  broken: {GLOO_SOCKET_IFNAME: envmx_missing0}\nprobe: {timeout_s: 30, collectives: [allreduce]}\n")
    args = ("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert cli.run(*args).returncode == 1
    again = cli.run(*args)
    assert again.returncode == 1
    assert "2 already in the store (1 failed: --rerun runs them again)" in again.stdout, again.stdout
    # --rerun measures the stored runs again: it says so (it said "2 runs, 0 already in the store")
    rerun = cli.run(*args, "--rerun")
    assert rerun.returncode == 1
    assert "sweep: 2 runs, 2 already in the store run again (--rerun: new attempts, history kept)" in rerun.stdout, rerun.stdout


def test_a_bad_input_sweep_starts_no_pool_server(cli, tmp_path):
    # issue 39 point 6: the config is validated before the warm pool's servers (torch imports) start
    site, log = tmp_path / "site", tmp_path / "started.txt"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"import sys\nwith open({str(log)!r}, 'a') as fh:\n    fh.write(' '.join(sys.orig_argv) + '\\n')\n")
    cli.env["PYTHONPATH"] = os.pathsep.join([str(site), cli.env.get("PYTHONPATH", "")])
    conf = write_conf(tmp_path / "c.yaml", "backend: gloo\ngrids: [1x2]\nsetups:\n  a: {NCCL_ALGO: Rin}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 2, done.stdout + done.stderr
    started = log.read_text()
    assert "-m envmatrix sweep" in started and "pool_server" not in started, started
