"""One rank of the ``mpi`` probe: ``python -m envmatrix.rank.mpi_main`` (imports mpi4py, never torch)."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from array import array
from typing import Mapping, Optional

from envmatrix.boundary import MPI4PY_MISSING, RESULT_DIR_VAR, any_rank, echoed_env
from envmatrix.rank.identity import gpu_identity, host_identity, rank_identity
from envmatrix.rank.main import Reporter, record_failure

SKIP_EXIT = 125


def world_problem(mpi_rank: int, mpi_size: int, launcher: Optional[tuple[int, int, int]]) -> Optional[str]:
    """Why MPI_COMM_WORLD disagrees with the launcher's own rank variables, or None."""
    if launcher is None:
        return None
    rank, world, _ = launcher
    if mpi_size == world and mpi_rank == rank:
        return None
    hint = (" (each rank is an MPI singleton: mpi4py's MPI library is not the one the launcher speaks, "
            "or the launcher is not an MPI launcher)") if mpi_size == 1 and world > 1 else ""
    return f"MPI_COMM_WORLD says rank {mpi_rank} of {mpi_size} but the launcher started rank {rank} of {world}{hint}"


def placement_problem(hosts: list[str], env: Mapping[str, str]) -> Optional[str]:
    """On real nodes (not emulated), ranks must sit ppn per host on nnodes hosts."""
    if env.get("ENVMATRIX_EMULATE") != "0":
        return None
    nnodes, ppn = int(env.get("ENVMATRIX_NNODES") or 1), int(env.get("ENVMATRIX_PPN") or 0)
    per_host: dict[str, int] = {}
    for host in hosts:
        per_host[host] = per_host.get(host, 0) + 1
    if len(per_host) == nnodes and (not ppn or set(per_host.values()) == {ppn}):
        return None
    counts = ", ".join(f"{h}: {n}" for h, n in sorted(per_host.items()))
    return f"ranks per host {counts}; the grid asks for {nnodes} hosts with {ppn or '?'} ranks each"


def main() -> int:
    spec = json.loads(os.environ.get("ENVMATRIX_PROBE", "{}"))
    launcher = rank_identity(os.environ)
    rank = launcher[0] if launcher else (any_rank(os.environ) or 0)
    reporter = Reporter(os.environ.get(RESULT_DIR_VAR, "."), rank)
    reporter.data.update(env=echoed_env(os.environ), device=f"cpu ({socket.gethostname()})")
    # Where it runs (no GPU: this probe is CPU only) and the python, before MPI_Init: a rank that MPI aborts in its
    # init (no Python exception, the process just ends) still names them in its last report.
    reporter.data.update(host_identity(os.environ))
    reporter.data["gpu_uuid"], reporter.data["pci_bus_id"] = gpu_identity(None, None)
    versions = reporter.data["versions"] = {"python": sys.version.split()[0]}
    started = time.perf_counter()
    reporter.phase("import")
    try:
        import mpi4py
    except ModuleNotFoundError:
        reporter.data["error"] = MPI4PY_MISSING.format(python=sys.executable)
        print(reporter.data["error"], file=sys.stderr, flush=True)
        reporter.phase("import", outcome="unresolved")
        return SKIP_EXIT
    versions["mpi4py"] = mpi4py.__version__
    try:
        reporter.phase("init")
        from mpi4py import MPI  # MPI_Init_thread happens here

        comm = MPI.COMM_WORLD
        versions.update(mpi_library=MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0],
                        mpi_standard="%d.%d" % MPI.Get_version())
        reporter.data["timings"]["init_s"] = time.perf_counter() - started
        problem = world_problem(comm.Get_rank(), comm.Get_size(), launcher)
        reporter.data["checks"].append({"collective": "mpi_world", "numel": comm.Get_size(), "wrong": int(problem is not None)})
        if problem:
            reporter.data["error"] = problem
            print(f"envmatrix mpi probe: {problem}", file=sys.stderr, flush=True)
            reporter.data["failed_at"] = time.time()
            reporter.phase("init", outcome="launch_error")
            return 1
    except Exception as exc:  # noqa: BLE001 - every failure is data
        return record_failure(reporter, "init_error", exc)
    try:
        reporter.phase("collectives")
        t0 = time.perf_counter()
        numel, size = int(spec.get("numel", 1024)), comm.Get_size()
        send = array("d", [float(comm.Get_rank() + 1)] * numel)
        got = array("d", [0.0] * numel)
        comm.Allreduce(send, got, op=MPI.SUM)
        expected = size * (size + 1) / 2
        wrong = sum(1 for v in got if v != expected)
        reporter.data["checks"].append({"collective": "mpi_allreduce", "numel": numel, "wrong": wrong,
                                        "seconds": time.perf_counter() - t0})
        hosts = comm.allgather(MPI.Get_processor_name())
        placement = placement_problem(hosts, os.environ)
        reporter.data["checks"].append({"collective": "mpi_hosts", "numel": len(hosts), "wrong": int(placement is not None),
                                        "hosts": hosts})
        comm.Barrier()
        reporter.data["timings"]["collectives_s"] = time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001
        return record_failure(reporter, "collective_error", exc)
    if wrong:
        reporter.data["error"] = f"mpi_allreduce: {wrong} of {numel} elements wrong"
        reporter.phase("done", outcome="wrong_result")
        return 3
    if placement:
        reporter.data["error"] = placement
        print(f"envmatrix mpi probe: {placement}", file=sys.stderr, flush=True)
        reporter.phase("done", outcome="launch_error")
        return 1
    reporter.data["timings"]["total_s"] = time.perf_counter() - started
    reporter.phase("done", outcome="pass")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if code == 0:
        from mpi4py import MPI

        MPI.Finalize()
    os._exit(code)
