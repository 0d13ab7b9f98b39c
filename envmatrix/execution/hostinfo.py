"""Host facts recorded with every sweep (GPUs, driver, topology) without importing torch."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any, Mapping

from envmatrix.execution.processes import run_capture


def parse_gpu_list(text: str) -> list[dict[str, str]]:
    """Parse ``nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader``."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4 and parts[0].isdigit():
            gpus.append({"index": parts[0], "name": parts[1], "driver": parts[2], "pci": parts[3]})
    return gpus


def visible_count(total: int, environ: Mapping[str, str]) -> int:
    """GPUs this process may use, honouring CUDA_VISIBLE_DEVICES."""
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return total
    entries = [e for e in cvd.split(",") if e.strip() and e.strip() != "-1"]
    return min(total, len(entries)) if all(e.strip().isdigit() for e in entries) else len(entries)


def gpu_inventory(environ: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    environ = os.environ if environ is None else environ
    done = run_capture(["nvidia-smi", "--query-gpu=index,name,driver_version,pci.bus_id", "--format=csv,noheader"])
    if done.returncode != 0:
        return []
    gpus = parse_gpu_list(done.stdout)
    return gpus[: visible_count(len(gpus), environ)]


def parse_gpu_capacity(text: str) -> list[dict[str, Any]]:
    """Parse ``nvidia-smi --query-gpu=compute_mode,memory.total --format=csv,noheader``: per GPU its compute mode
    (Default, Exclusive_Process, Prohibited) and total memory in MiB (None where nvidia-smi says [N/A])."""
    found = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 or not parts[0]:
            continue
        amount = parts[1].split()
        memory = int(amount[0]) if amount and amount[0].isdigit() and amount[1:] == ["MiB"] else None
        found.append({"compute_mode": parts[0], "memory_mib": memory})
    return found


def visible_subset(items: list[Any], environ: Mapping[str, str]) -> list[Any]:
    """The entries (one per GPU, nvidia-smi's order) CUDA_VISIBLE_DEVICES lets this process use, in its order."""
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return list(items)
    entries = [e.strip() for e in cvd.split(",") if e.strip() and e.strip() != "-1"]
    if all(e.isdigit() for e in entries):
        return [items[int(e)] for e in entries if int(e) < len(items)]
    return list(items[: visible_count(len(items), environ)])  # UUIDs or MIG names: nvidia-smi's order, counted


def gpu_capacity(environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Compute mode and memory of each visible GPU ([] without nvidia-smi): what ranks sharing a GPU need."""
    environ = os.environ if environ is None else environ
    done = run_capture(["nvidia-smi", "--query-gpu=compute_mode,memory.total", "--format=csv,noheader"])
    if done.returncode != 0:
        return []
    return visible_subset(parse_gpu_capacity(done.stdout), environ)


def parse_nccl_conf(text: str) -> dict[str, str]:
    """NCCL's conf-file syntax: VAR=VALUE per line, '#' comments (src/misc/param.cc)."""
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = line.split("=", 1)
            if key.strip():
                found[key.strip()] = value.strip()
    return found


def nccl_conf_files(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """Files NCCL reads to fill variables the env leaves unset (NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf)."""
    first = environ.get("NCCL_CONF_FILE") or os.path.join(environ.get("HOME", "~"), ".nccl.conf")
    found = []
    for path in (first, "/etc/nccl.conf"):
        try:
            with open(os.path.expanduser(path)) as fh:
                found.append({"path": path, "variables": parse_nccl_conf(fh.read())})
        except OSError:
            continue
    return found


def host_facts(with_topology: bool = True) -> dict[str, Any]:
    gpus = gpu_inventory()
    facts: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "gpus": gpus,
        "driver": gpus[0]["driver"] if gpus else None,
        "nccl_conf_files": nccl_conf_files(os.environ),
    }
    if gpus and with_topology:
        topo = run_capture(["nvidia-smi", "topo", "-m"])
        facts["topology"] = topo.stdout if topo.returncode == 0 else None
    return facts
