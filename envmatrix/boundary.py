"""The process boundary, the one vocabulary both sides share: what a run is told and what it reports.

The driver tells a process its argv, env and log file (:class:`ProcessSpec`); each rank finds its
result directory in ``ENVMATRIX_RESULT_DIR`` and reports there: ``rank{R}.json`` (the probe's phases,
checks and timings) and ``rank{R}.env.json`` (what the launcher shim saw: :func:`echoed_env` and its
:func:`env_digest`, which the driver's delivery check reads back). The process itself ends with a
:class:`ProcessOutcome`. A rank learns who it is from its launcher's variables (:data:`LAUNCHER_RANK_VARS`,
read by the launcher shim and by the rank). Stdlib only: rank processes import it without the driver.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

RESULT_DIR_VAR = "ENVMATRIX_RESULT_DIR"
# The mpi probe's rank says it when mpi4py is absent; the driver refuses with it before launching (probes/mpi.py).
MPI4PY_MISSING = "mpi4py is not installed for {python}; install it with: pip install 'envmatrix[mpi]' (needs an MPI library such as OpenMPI)"
# The emulated host a rank runs as (planning.placement: emh0, emh1, ...); the rank records it as its hostname.
EMULATED_HOST_VAR = "ENVMATRIX_EMULATED_HOST"


@dataclass(frozen=True)
class ProcessSpec:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    log_path: str
    label: str = ""
    cwd: Optional[str] = None


@dataclass
class ProcessOutcome:
    label: str
    pid: Optional[int]
    exit_code: Optional[int]
    signal: Optional[str]
    killed_by: Optional[str]  # "timeout" | "peer_failure" | None
    ended_at: float
    launch_error: Optional[str] = None


def rank_report_path(result_dir: str, rank: int) -> str:
    return os.path.join(result_dir, f"rank{rank}.json")


def env_report_path(result_dir: str, rank: int) -> str:
    return os.path.join(result_dir, f"rank{rank}.env.json")


# ----------------------------------------------------------------------------- the env a rank reports

ECHO_PREFIXES = ("NCCL_", "FI_", "LD_", "GLOO_", "TORCH_", "NVSHMEM_", "CUDA_", "UCX_", "MASTER_", "ENVMATRIX_")
ECHO_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def is_echoed(name: str) -> bool:
    return name.startswith(ECHO_PREFIXES) or name in ECHO_NAMES


def echoed_env(env: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The slice of a rank's env that can change communication (and no secrets), plus ``extra`` names."""
    wanted = set(extra)
    return {k: v for k, v in sorted(env.items()) if is_echoed(k) or k in wanted}


def env_digest(env: Mapping[str, str]) -> str:
    """sha256 of the canonical JSON of ``env`` (what the shim writes next to the env it saw)."""
    return hashlib.sha256(json.dumps(dict(sorted(env.items())), sort_keys=True).encode()).hexdigest()


# ----------------------------------------------------------------------------- who a rank is, as its launcher says

# The one table of launcher rank variables, read on both sides: by the launcher shim (launchers.identity, which
# tries the launcher's own family first) and by the rank (rank.identity, in this order: torch.distributed's
# RANK/WORLD_SIZE first, as torch itself reads them). family -> (rank, world, local rank, local size, node index)
# variable names; later names in a tuple are fallbacks.
LAUNCHER_RANK_VARS: dict[str, tuple[tuple[str, ...], ...]] = {
    "torchrun": (("RANK",), ("WORLD_SIZE",), ("LOCAL_RANK",), ("LOCAL_WORLD_SIZE",), ("GROUP_RANK",)),
    "ompi": (("OMPI_COMM_WORLD_RANK",), ("OMPI_COMM_WORLD_SIZE",), ("OMPI_COMM_WORLD_LOCAL_RANK",),
             ("OMPI_COMM_WORLD_LOCAL_SIZE",), ()),
    "pmix": (("PMIX_RANK",), ("PMIX_SIZE",), ("PMIX_LOCAL_RANK",), (), ()),
    "pals": (("PALS_RANKID",), ("PALS_SIZE", "PMI_SIZE"), ("PALS_LOCAL_RANKID", "MPI_LOCALRANKID"),
             ("PALS_LOCAL_SIZE", "MPI_LOCALNRANKS"), ("PALS_NODEID",)),
    "pmi": (("PMI_RANK",), ("PMI_SIZE",), ("MPI_LOCALRANKID",), ("MPI_LOCALNRANKS",), ()),  # MPICH Hydra
    "slurm": (("SLURM_PROCID",), ("SLURM_NTASKS", "SLURM_NPROCS"), ("SLURM_LOCALID",), (), ("SLURM_NODEID",)),
}


def rank_var_names() -> str:
    """'RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, ...': what a rank without an identity lacks."""
    return ", ".join(f"{names[0][0]}/{names[1][0]}" for names in LAUNCHER_RANK_VARS.values())


@dataclass(frozen=True)
class LauncherIdentity:
    """What a launcher told one rank about itself, before envmatrix derives anything."""

    family: str
    rank: int
    world: int
    local_rank: int
    local_size: Optional[int]
    node: Optional[int]
    source: dict  # the raw variables it was read from


def _first(env: Mapping[str, str], names: Iterable[str]) -> tuple[Optional[str], Optional[str]]:
    for name in names:
        if env.get(name, "") != "":
            return name, env[name]
    return None, None


def any_rank(env: Mapping[str, str]) -> Optional[int]:
    """The rank from the first family whose rank variable is set, even without its world size (a rank's
    result file still needs a name when the identity is incomplete)."""
    for names in LAUNCHER_RANK_VARS.values():
        _, value = _first(env, names[0])
        if value is not None:
            return int(value)
    return None


def read_launcher_identity(env: Mapping[str, str], families: Iterable[str]) -> Optional[LauncherIdentity]:
    """The identity given by the first of ``families`` whose rank and world variables are set, or None."""
    for family in families:
        rank_v, world_v, local_v, lsize_v, node_v = LAUNCHER_RANK_VARS[family]
        (rn, rank), (wn, world) = _first(env, rank_v), _first(env, world_v)
        if rank is None or world is None:
            continue
        ln, local = _first(env, local_v)
        sn, lsize = _first(env, lsize_v)
        nn, node = _first(env, node_v)
        source = {k: env[k] for k in (rn, wn, ln, sn, nn) if k}
        return LauncherIdentity(
            family, int(rank), int(world), int(local) if local is not None else int(rank),
            int(lsize) if lsize is not None else None, int(node) if node is not None else None, source,
        )
    return None
