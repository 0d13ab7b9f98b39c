"""A rank whose init fails still records where it ran and what it loaded: host, GPU (cpu for gloo), torch and NCCL
versions are read before init_process_group, so the failing cell of a matrix names them beside the passing one
(real CLI, real gloo ranks; GLOO_SOCKET_IFNAME names an interface that does not exist). Likewise the mpi probe's
ranks before MPI_Init (real mpirun; an MPI_Init that Open MPI aborts)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import socket
import sqlite3

import pytest

from conftest import write_conf

pytestmark = pytest.mark.slow  # sweeps of two 1x2 cells with real ranks (about 8 s and 3 s)

CONF = """
name: init_identity
backend: gloo
grids: [1x2]
setups:
  baseline: {}
  missing_if: {GLOO_SOCKET_IFNAME: envmx_missing0}
probe:
  timeout_s: 60
  collectives: [allreduce]
"""


def _stored(run_dir) -> dict[str, dict]:
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        records = [json.loads(row[0]) for row in db.execute("SELECT result_json FROM results ORDER BY seq")]
    return {r["setup"]["name"]: r for r in records}


def _torch_facts() -> tuple[str, str]:
    """(torch.__version__, what a rank must say about the NCCL torch was built with) of this interpreter."""
    import torch

    if hasattr(torch._C, "_nccl_version"):  # a CUDA build: the version torch.cuda.nccl reports
        return torch.__version__, ".".join(map(str, torch.cuda.nccl.version()))
    return torch.__version__, "none"


def test_failing_init_records_host_gpu_and_versions(cli, tmp_path):
    conf = write_conf(tmp_path / "conf.yaml", CONF)
    out = tmp_path / "run"
    done = cli.run("sweep", f"conf={conf}", "--out", str(out))
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    stored = _stored(out)
    failed, passed = stored["missing_if"], stored["baseline"]
    assert failed["outcome"] == "init_error" and passed["outcome"] == "pass", (failed["outcome"], passed["outcome"])
    torch_version, nccl_built = _torch_facts()
    for record in (failed, passed):
        assert len(record["ranks"]) == 2, record["setup"]["name"]
        for rank in record["ranks"]:
            where = (record["setup"]["name"], rank["rank"])
            assert rank["phase"] == ("init" if record is failed else "done"), where
            assert rank["hostname"] == socket.gethostname(), where
            assert rank["gpu_uuid"] == "cpu" and rank["pci_bus_id"] == "cpu" and rank["device"] == "cpu", where
            assert rank["nic"] == ("envmx_missing0" if record is failed else "lo"), where
            assert rank["versions"]["torch"] == torch_version, where
            # said honestly: the NCCL torch was built with, or that it has none (a CPU build), never left out
            assert rank["versions"]["nccl_torch_built"].split(" ")[0] == nccl_built, where
            assert "nccl_loaded" in rank["versions"], where
    # the result's own versions (the matrix's Versions section) come from its ranks: the failing run has them too
    assert failed["versions"]["torch"] == torch_version


MPI_CONF = """
backend: gloo
launcher: mpirun
grids: [1x2]
setups:
  plain: {}
  bad_pml: {OMPI_MCA_pml: envmx_missing}
probe: {name: mpi, timeout_s: 60}
"""


@pytest.mark.skipif(not (importlib.util.find_spec("mpi4py") and shutil.which("mpirun")),
                    reason="mpi4py or OpenMPI's mpirun missing (envmatrix[mpi], openmpi-bin)")
def test_mpi_rank_aborted_in_mpi_init_records_host_and_versions(cli, tmp_path):
    conf = write_conf(tmp_path / "mpi.yaml", MPI_CONF)
    out = tmp_path / "run"
    # Open MPI finds no pml component named so: MPI_Init aborts the process, no Python exception is raised
    done = cli.run("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    stored = _stored(out)
    failed, passed = stored["bad_pml"], stored["plain"]
    assert passed["outcome"] == "pass" and failed["outcome"] != "pass", (failed["outcome"], passed["outcome"])
    mpi4py_version = passed["versions"]["mpi4py"]
    cause = failed["root_cause"]["rank"]
    for record in (failed, passed):
        for rank in record["ranks"]:
            where = (record["setup"]["name"], rank["rank"])
            if record is failed and rank["rank"] != cause and rank["phase"] is None:
                # both ranks abort in MPI_Init: the one that got there first ends the job, and on a loaded host
                # mpirun stopped the other before it had said a word (CI run 96): stopped, nothing invented
                assert rank["outcome"] == "peer_killed" and not rank["versions"].get("mpi4py"), (where, rank["outcome"])
                continue
            assert rank["phase"] == ("init" if record is failed else "done"), where
            assert rank["hostname"] == socket.gethostname() and rank["nic"] == "lo", where
            assert rank["gpu_uuid"] == "cpu" and rank["pci_bus_id"] == "cpu", where
            assert rank["versions"]["mpi4py"] == mpi4py_version and rank["versions"]["python"], where
    assert "mpi_library" not in failed["versions"]  # read only from an initialised MPI: not invented
