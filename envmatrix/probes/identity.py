"""Rank identity from whatever launcher started us (pure; used in rank processes)."""

from __future__ import annotations

from typing import Mapping, Optional

# (rank, world, local rank) variables per launcher family, most specific first.
_FAMILIES = (
    ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK"),
    ("PALS_RANKID", "PMI_SIZE", "PALS_LOCAL_RANKID"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
)


def rank_identity(env: Mapping[str, str]) -> Optional[tuple[int, int, int]]:
    """(rank, world_size, local_rank) or None when no launcher variables are set."""
    for rank_var, world_var, local_var in _FAMILIES:
        if rank_var in env and world_var in env:
            rank, world = int(env[rank_var]), int(env[world_var])
            local = int(env.get(local_var, rank))
            return rank, world, local
    return None


ECHO_PREFIXES = ("NCCL_", "FI_", "LD_", "GLOO_", "TORCH_", "NVSHMEM_", "CUDA_", "UCX_", "MASTER_", "ENVMATRIX_")
ECHO_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def echoed_env(env: Mapping[str, str]) -> dict[str, str]:
    """The slice of a rank's env that can change communication (and no secrets)."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(ECHO_PREFIXES) or k in ECHO_NAMES}
