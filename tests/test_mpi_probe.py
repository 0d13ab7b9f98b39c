"""The mpi probe: pure checks of MPI's view against the launcher's, then real sweeps under the real OpenMPI
mpirun (.ci/run installs openmpi-bin and the mpi extra), under a non-MPI launcher, and without mpi4py."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys

import pytest

from conftest import assert_no_processes, write_conf
from envmatrix.errors import ConfigError
from envmatrix.probes import get_probe
from envmatrix.rank.mpi_main import placement_problem, world_problem

HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(not (HAVE_MPI4PY and shutil.which("mpirun")),
                               reason="mpi4py or OpenMPI's mpirun missing: pip install 'envmatrix[mpi]' and apt-get install openmpi-bin")


def test_world_agreeing_with_the_launcher_is_fine():
    assert world_problem(3, 4, (3, 4, 1)) is None
    assert world_problem(0, 1, None) is None  # no launcher variables: nothing to compare


def test_singletons_are_named_as_such():
    problem = world_problem(0, 1, (1, 2, 1))
    assert "rank 0 of 1 but the launcher started rank 1 of 2" in problem and "MPI singleton" in problem
    assert "singleton" not in world_problem(2, 4, (1, 4, 1))  # a rank mix-up is not a singleton


def test_placement_on_real_nodes():
    env = {"ENVMATRIX_EMULATE": "0", "ENVMATRIX_NNODES": "2", "ENVMATRIX_PPN": "2"}
    assert placement_problem(["a", "a", "b", "b"], env) is None
    assert placement_problem(["a", "a", "a", "a"], env) == "ranks per host a: 4; the grid asks for 2 hosts with 2 ranks each"
    assert placement_problem(["a", "a", "a", "b"], env) is not None
    assert placement_problem(["a"] * 4, {**env, "ENVMATRIX_EMULATE": "1"}) is None  # emulated nodes share a host


def test_params_are_checked():
    assert get_probe("mpi").spec({}).params["numel"] == 1024
    with pytest.raises(ConfigError, match=r"probe.numel: 0 not allowed"):
        get_probe("mpi").spec({"numel": 0})
    with pytest.raises(ConfigError, match=r"unknown key 'numell' \(did you mean numel\?\)"):
        get_probe("mpi").spec({"numell": 4})


def _sweep(cli, tmp_path, launcher, grids="[1x2, 2x1]"):
    conf = write_conf(tmp_path / "m.yaml", f"backend: gloo\nlauncher: {launcher}\ngrids: {grids}\nsetups: {{plain: {{}}}}\n"
                                           "probe: {name: mpi, timeout_s: 60}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"), timeout=240)
    assert_no_processes(cli.marker)
    results = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    outcomes = {r["outcome"] for r in results}
    # the exit-code convention: 1 when a cell failed, 3 when the only non-passing cells are unresolved
    expected = 1 if outcomes - {"pass", "unresolved"} else (3 if "unresolved" in outcomes else 0)
    assert done.returncode == expected, done.stdout + done.stderr
    return results


@needs_mpi
@pytest.mark.slow
def test_mpi_layer_passes_under_real_mpirun(cli, tmp_path):
    results = _sweep(cli, tmp_path, "mpirun", "[1x2, 2x1, 2x2]")
    assert [r["outcome"] for r in results] == ["pass"] * 3
    for result in results:
        assert "Open MPI" in result["versions"]["mpi_library"] and result["versions"]["mpi4py"]
        for rank in result["ranks"]:
            checks = {c["collective"]: c for c in rank["checks"]}
            assert checks["mpi_world"]["numel"] == len(result["ranks"]) and checks["mpi_world"]["wrong"] == 0
            assert checks["mpi_allreduce"]["wrong"] == 0 and checks["mpi_allreduce"]["numel"] == 1024
            assert len(checks["mpi_hosts"]["hosts"]) == len(result["ranks"])


@pytest.mark.skipif(not HAVE_MPI4PY, reason="mpi4py missing: pip install 'envmatrix[mpi]'")
def test_a_launcher_that_does_not_speak_mpi_is_a_launch_error(cli, tmp_path):
    (result,) = _sweep(cli, tmp_path, "local", "[1x2]")
    assert result["outcome"] == "launch_error"
    assert "MPI singleton" in result["root_cause"]["line"]


def test_without_mpi4py_the_run_is_unresolved_with_one_line(cli, tmp_path):
    # What the interpreter raises when mpi4py is not installed, put first on the ranks' path.
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "mpi4py.py").write_text("raise ModuleNotFoundError(\"No module named 'mpi4py'\", name='mpi4py')\n")
    cli.env["PYTHONPATH"] = f"{hide}:{cli.env.get('PYTHONPATH', '')}"
    (result,) = _sweep(cli, tmp_path, "local", "[1x2]")
    assert result["outcome"] == "unresolved"
    assert result["root_cause"]["line"].startswith(f"mpi4py is not installed for {sys.executable}")
    assert "pip install 'envmatrix[mpi]'" in result["root_cause"]["line"]
