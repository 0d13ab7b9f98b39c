"""Who and where a rank is: its rank from whatever launcher started it, its host, GPU and NIC (rank side)."""

from __future__ import annotations

import socket
from typing import Any, Mapping, Optional

from envmatrix.boundary import EMULATED_HOST_VAR, LAUNCHER_RANK_VARS, read_launcher_identity


def rank_identity(env: Mapping[str, str]) -> Optional[tuple[int, int, int]]:
    """(rank, world_size, local_rank) or None when no launcher variables are set; families in the table's
    order, torch.distributed's RANK/WORLD_SIZE first (what init_process_group reads)."""
    ident = read_launcher_identity(env, LAUNCHER_RANK_VARS)
    return None if ident is None else (ident.rank, ident.world, ident.local_rank)


# ----------------------------------------------------------------------------- where a rank runs


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


def hostname(env: Mapping[str, str]) -> str:
    """The host a rank ran on: the emulated host it was placed as (several share this machine), else this machine."""
    return env.get(EMULATED_HOST_VAR) or socket.gethostname()


def host_identity(env: Mapping[str, str]) -> dict[str, Optional[str]]:
    """Where a rank runs (RankResult's hostname/nic/nic_source), read from the env and this machine alone: a rank
    records it before torch's import and init_process_group, so one that fails there still names its host. Its
    GPU (gpu_uuid/pci_bus_id) follows once its device is chosen (gpu_identity)."""
    nic, source = rendezvous_interface(env)
    return {"hostname": hostname(env), "nic": nic, "nic_source": source}
