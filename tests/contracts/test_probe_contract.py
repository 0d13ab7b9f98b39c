"""The probe contract, for every registered probe with tiny real rank workers on gloo.

The same four cases for every probe: the workers pass; rank 1 exits 3 (fail); rank 1 stops (hang, the
probe's timeout kills every rank); rank 1 dies of SIGSEGV (crash). The fault is injected into the real
rank processes by a sitecustomize.py put first on their PYTHONPATH through the setup, so it reaches the
ranks the way any setup variable does, whatever the launcher. No child may outlive a case.
The exit and crash cases also run under every other launcher the probe runs under (mpirun, torchrun, and srun
in a real one-node Slurm): the root cause must name rank 1 and its host, and rank 1's record its signal or exit
code, although under those launchers rank 1 dies before it reports and one launcher process hosts every rank.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from conftest import assert_no_processes
from envmatrix.env import Atom, Setup
from envmatrix.env.atoms import PREPEND
from envmatrix.engine.launch import execute
from envmatrix.launchers import get_launcher
from envmatrix.planning import Grid, plan_runs
from envmatrix.probes import get_probe, probe_names
from envmatrix.results import CRASH, PASS, TIMEOUT
from slurm_cluster import slurm, slurm_allocation  # noqa: F401  (srun cases run in a real one-node Slurm)

PINS = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

SITECUSTOMIZE = r"""
import ctypes, os, sys, time
_rank = next((os.environ[k] for k in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID") if k in os.environ), None)
_fault = os.environ.get("ENVMATRIX_CONTRACT_FAULT")
if _rank == "1" and _fault == "exit":
    sys.exit(3)
if _rank == "1" and _fault == "hang":
    time.sleep(600)
if _rank == "1" and _fault == "crash":
    ctypes.string_at(0)  # a real SIGSEGV
"""


def _have_mpi() -> bool:
    return importlib.util.find_spec("mpi4py") is not None and shutil.which("mpirun") is not None


def _launcher_missing(name: str):
    """Why launcher ``name`` cannot run here, or None."""
    if name == "mpirun" and shutil.which("mpirun") is None:
        return "OpenMPI's mpirun missing: apt-get install openmpi-bin"
    if name == "torchrun" and importlib.util.find_spec("torch") is None:
        return "torch missing: pip install torch==2.13.0"
    return None


# probe name -> (launchers it runs under, the first its home; params with a short timeout; why it cannot run here or
# None); a new probe adds its line. Every launcher that runs many ranks under one process (mpirun, torchrun, srun)
# must still blame the rank that failed: the launcher's own account names it (launchers.rank_exits).
TRAITS = {
    "builtin": (("local", "mpirun", "torchrun", "srun"),
                {"collectives": ["allreduce"], "numel": 64, "timeout_s": 20.0, "grace_s": 1.0}, None),
    "command": (("local", "mpirun", "torchrun", "srun"),
                {"command": [sys.executable, "-c", "pass"], "timeout_s": 20.0, "grace_s": 1.0}, None),
    "mpi": (("mpirun",), {"numel": 64, "timeout_s": 20.0, "grace_s": 1.0},
            None if _have_mpi() else "mpi4py or OpenMPI's mpirun missing: pip install 'envmatrix[mpi]', apt-get install openmpi-bin"),
    # the host pair test's tools (ping, iperf3) between ranks 0 and 1 on loopback
    "netpair": (("local", "mpirun"), {"pairs": [[0, 1]], "addresses": ["127.0.0.1", "127.0.0.1"], "iperf_seconds": 1,
                                      "timeout_s": 30.0, "grace_s": 1.0}, None),
}

# the outcome each case must produce
CASES = {"pass": PASS, "exit": "fail", "hang": TIMEOUT, "crash": CRASH}
# every case on the probe's home launcher; the blame cases on every other launcher it runs under
BLAME_CASES = ("exit", "crash")
COMBOS = [(name, launcher, fault) for name, (launchers, _, _) in TRAITS.items() for launcher in launchers
          for fault in (CASES if launcher == launchers[0] else BLAME_CASES)]


def _run_case(name: str, fault: str, tmp_path: Path, launcher_name: str, extra_env=None):
    _, params, missing = TRAITS[name]
    missing = missing or _launcher_missing(launcher_name)
    if missing:
        pytest.skip(missing)
    fault_dir = tmp_path / "fault"
    fault_dir.mkdir()
    (fault_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    atoms = (Atom("ENVMATRIX_CONTRACT_FAULT", value=fault), Atom("PYTHONPATH", op=PREPEND, value=str(fault_dir)))
    if fault == "hang":
        params = {**params, "timeout_s": 4.0}
    elif launcher_name != TRAITS[name][0][0]:
        # torchrun's agent and srun start slower than the ranks (torch imports, a step); a failing case ends at
        # the first failure anyway, so only a broken one waits this long
        params = {**params, "timeout_s": 90.0}
    probe = get_probe(name)
    run = plan_runs([Setup(fault, atoms)], [Grid(1, 2)], probe.spec(params, backend="gloo"), "gloo", launcher_name)[0]
    marker = uuid.uuid4().hex
    env = {**os.environ, **(extra_env or {}), "ENVMATRIX_TEST_MARKER": marker, "PYTHONUNBUFFERED": "1"}
    cls = type(get_launcher(launcher_name))
    launcher = cls() if launcher_name == "local" else cls(python=sys.executable)
    result = execute(run, launcher, probe, str(tmp_path / "work"), env, PINS, 0)
    assert_no_processes(marker, wait_s=8)
    return result


def test_every_registered_probe_runs_the_contract():
    assert set(probe_names()) <= set(TRAITS), f"add to TRAITS: {set(probe_names()) - set(TRAITS)}"


@pytest.fixture
def launcher_env(request, name: str, launcher: str):
    """srun runs in a real one-node Slurm allocation (tests/slurm_cluster.py); the others need nothing."""
    if launcher != "srun" or TRAITS[name][2]:
        return {}
    return request.getfixturevalue("slurm_allocation")


def _marks(name: str, launcher: str, fault: str) -> list:
    """srun cases share this host's one real Slurm (its fixture starts and stops munged): one xdist worker runs them
    all, with tests/test_launchers_srun.py's. netpair's receiver serves iperf3 on a fixed port (5201): its cases run
    on one worker too. A hang waits out its timeout: not in the fast lane."""
    marks = [pytest.mark.xdist_group("slurm")] if launcher == "srun" else []
    marks += [pytest.mark.xdist_group("iperf3_port")] if name == "netpair" else []
    return marks + [pytest.mark.slow] if fault == "hang" else marks


@pytest.mark.parametrize("name,launcher,fault", [pytest.param(*c, id="-".join(c), marks=_marks(*c)) for c in COMBOS])
def test_failure_class(name: str, launcher: str, fault: str, tmp_path: Path, launcher_env):
    result = _run_case(name, fault, tmp_path, launcher, launcher_env)
    explain = (result.outcome, result.root_cause, [(r.outcome, r.error, r.log_tail[-300:]) for r in result.ranks])
    if CASES[fault] == "fail":
        assert result.outcome not in (PASS, TIMEOUT, CRASH), explain
    else:
        assert result.outcome == CASES[fault], explain
    if fault != "pass":
        assert result.root_cause.get("line"), explain
    if fault in BLAME_CASES:  # a hang is blamed by the hang diagnosis, not tested here
        assert result.root_cause.get("rank") == 1, explain
        assert result.root_cause.get("host"), explain
        failed = next(r for r in result.ranks if r.rank == 1)
        if fault == "crash":
            assert failed.signal == "SIGSEGV", explain
        else:
            assert failed.exit_code not in (None, 0), explain
    if fault == "hang":
        assert result.duration_s < 4.0 + 10, explain
