"""What each launcher tells a rank about itself (pure): read by the launcher shim inside every rank.

The rank side reads torch.distributed's view of the same (``envmatrix.rank.identity.rank_identity``); this
module knows each launcher family's own variables, so the shim can derive RANK/WORLD_SIZE/LOCAL_RANK from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional


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


# family -> (rank, world, local rank, local size, node index) variable names; later names are fallbacks.
LAUNCHER_VARS: dict[str, tuple[tuple[str, ...], ...]] = {
    "ompi": (("OMPI_COMM_WORLD_RANK",), ("OMPI_COMM_WORLD_SIZE",), ("OMPI_COMM_WORLD_LOCAL_RANK",),
             ("OMPI_COMM_WORLD_LOCAL_SIZE",), ()),
    "pals": (("PALS_RANKID", "PMI_RANK"), ("PALS_SIZE", "PMI_SIZE"), ("PALS_LOCAL_RANKID", "MPI_LOCALRANKID"),
             ("PALS_LOCAL_SIZE", "MPI_LOCALNRANKS"), ("PALS_NODEID",)),
    "slurm": (("SLURM_PROCID",), ("SLURM_NTASKS", "SLURM_NPROCS"), ("SLURM_LOCALID",), (), ("SLURM_NODEID",)),
    "torchrun": (("RANK",), ("WORLD_SIZE",), ("LOCAL_RANK",), ("LOCAL_WORLD_SIZE",), ("GROUP_RANK",)),
}
# Which family each launcher speaks; unknown launchers try them in this order.
LAUNCHER_FAMILY = {"mpirun": "ompi", "mpiexec": "pals", "srun": "slurm", "torchrun": "torchrun"}
_ORDER = ("ompi", "pals", "slurm", "torchrun")


def _first(env: Mapping[str, str], names: Iterable[str]) -> tuple[Optional[str], Optional[str]]:
    for name in names:
        if env.get(name, "") != "":
            return name, env[name]
    return None, None


def launcher_identity(env: Mapping[str, str], launcher: Optional[str] = None) -> Optional[LauncherIdentity]:
    """Identity as the launcher's own variables give it (its family first), or None."""
    preferred = LAUNCHER_FAMILY.get(launcher or "")
    families = ((preferred,) if preferred else ()) + tuple(f for f in _ORDER if f != preferred)
    for family in families:
        rank_v, world_v, local_v, lsize_v, node_v = LAUNCHER_VARS[family]
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
