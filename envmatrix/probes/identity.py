"""Rank identity from whatever launcher started us (pure; used in rank processes)."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

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


ECHO_PREFIXES = ("NCCL_", "FI_", "LD_", "GLOO_", "TORCH_", "NVSHMEM_", "CUDA_", "UCX_", "MASTER_", "ENVMATRIX_")
ECHO_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def is_echoed(name: str) -> bool:
    return name.startswith(ECHO_PREFIXES) or name in ECHO_NAMES


def echoed_env(env: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The slice of a rank's env that can change communication (and no secrets), plus ``extra`` names."""
    wanted = set(extra)
    return {k: v for k, v in sorted(env.items()) if is_echoed(k) or k in wanted}


# ----------------------------------------------------------------------------- where a rank runs (rank side)


def gpu_identity(torch: Any, device: Any) -> tuple[str, str]:
    """(GPU UUID, PCI bus id) of ``device``, or ("cpu", "cpu") for a CPU rank; torch is passed in
    so the driver never imports it."""
    if getattr(device, "type", "cpu") != "cuda":
        return "cpu", "cpu"
    props = torch.cuda.get_device_properties(device)
    uuid = str(getattr(props, "uuid", "") or "") or "unknown"
    if uuid != "unknown" and not uuid.startswith("GPU-"):
        uuid = f"GPU-{uuid}"  # nvidia-smi's spelling, so the two can be matched
    domain, bus, dev = (getattr(props, f"pci_{k}_id", None) for k in ("domain", "bus", "device"))
    pci = f"{domain:08x}:{bus:02x}:{dev:02x}.0" if None not in (domain, bus, dev) else "unknown"
    return uuid, pci


def interface_of_address(address: str) -> Optional[str]:
    """Name of the local interface that holds IPv4 ``address`` (SIOCGIFADDR per interface)."""
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:
                continue
            if socket.inet_ntoa(packed[20:24]) == address:
                return name
    return None


def rendezvous_interface(env: Mapping[str, str]) -> tuple[Optional[str], str]:
    """(interface, how it was found): GLOO_SOCKET_IFNAME when set, else the one routing to MASTER_ADDR."""
    named = (env.get("GLOO_SOCKET_IFNAME") or "").split(",")[0].strip()
    if named:
        return named, "GLOO_SOCKET_IFNAME"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            # connect() on UDP only picks the route and source address; nothing is sent.
            sock.connect((socket.gethostbyname(env.get("MASTER_ADDR") or "127.0.0.1"), 9))
            local = sock.getsockname()[0]
    except OSError:
        return None, "route to MASTER_ADDR"
    return interface_of_address(local), "route to MASTER_ADDR"


def host_identity(env: Mapping[str, str], torch: Any = None, device: Any = None) -> dict[str, Optional[str]]:
    """What a rank records about where it ran (RankResult's hostname/gpu_uuid/pci_bus_id/nic)."""
    uuid, pci = gpu_identity(torch, device) if torch is not None else ("cpu", "cpu")
    nic, source = rendezvous_interface(env)
    return {"hostname": socket.gethostname(), "gpu_uuid": uuid, "pci_bus_id": pci, "nic": nic, "nic_source": source}
