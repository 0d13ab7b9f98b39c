"""Where an NxP grid's ranks run on this host: one GPU per rank, or emulated hosts sharing the visible GPUs.

NCCL tells hosts apart by their host hash; a distinct ``NCCL_HOSTID`` per emulated node makes ranks on one box
separate hosts to NCCL, so pairs inside a node use P2P/SHM and pairs across nodes use NET, as on a cluster.
With ``emulate_hosts`` a grid of more ranks than visible GPUs places them round-robin on the GPUs (shared-gpu).
NCCL refuses two ranks of one host on one GPU ("Duplicate GPU detected"), so ranks of a node that share a GPU
are split into NCCL hosts of their own (one per round of the GPUs): on one GPU every pair of ranks talks NET.
Pass/fail and transport are what shared runs show; their bandwidth is not representative.
Pure: the launcher reads a placement, the records carry its ``to_json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from envmatrix.errors import PlanError
from envmatrix.planning.grid import Grid
from envmatrix.results import SHARED_GPU

ONE_PER_RANK = "one-gpu-per-rank"
CPU = "cpu"

GIB = 1 << 30
# What one rank holds on its GPU besides the probe's buffers: measured torch+NCCL contexts are 0.4-0.6 GiB.
CUDA_CONTEXT_BYTES = GIB // 2
# NCCL's own connection buffers (NCCL_BUFFSIZE 4 MiB per channel, send and receive, per peer and transport).
NCCL_BUFFER_BYTES = GIB // 4
# Compute modes in which a second process cannot open a context on a GPU that already has one (or any).
SINGLE_CONTEXT_MODES = ("Exclusive_Process", "Exclusive_Thread", "Prohibited")


def emulated_hostid(node: int, part: int = 0) -> str:
    """The NCCL_HOSTID of emulated node ``node`` (NCCL hashes it instead of the machine's own host id); ``part``
    numbers the NCCL hosts a node is split into when its ranks share GPUs."""
    return f"envmatrix-node{node}" + (f".{part}" if part else "")


def emulated_hostname(node: int) -> str:
    """The name an emulated host's ranks record (emh0, emh1, ...), so reports group them per host."""
    return f"emh{node}"


@dataclass(frozen=True)
class RankPlace:
    rank: int
    node: int
    local_rank: int
    device: Optional[int]  # index among the visible GPUs; None on CPU
    host_id: Optional[str]  # NCCL_HOSTID; None: the machine's own
    hostname: Optional[str]  # the emulated host's name; None: the machine's own


@dataclass(frozen=True)
class Placement:
    kind: str  # ONE_PER_RANK | SHARED_GPU | CPU
    ranks: tuple[RankPlace, ...]
    gpus: int  # GPUs the ranks run on (0 on CPU)
    emulated_hosts: bool  # ranks record their emulated host's name

    @property
    def world(self) -> int:
        return len(self.ranks)

    @property
    def shared(self) -> bool:
        return self.kind == SHARED_GPU

    @property
    def ranks_per_gpu(self) -> int:
        per = [sum(1 for r in self.ranks if r.device == d) for d in range(self.gpus)]
        return max(per, default=0)

    @property
    def label(self) -> str:
        gpus = f"{self.gpus} GPU" + ("" if self.gpus == 1 else "s")
        ranks = f"{self.world} rank" + ("" if self.world == 1 else "s")
        if self.kind == SHARED_GPU:
            return f"{SHARED_GPU} ({ranks} on {gpus})"
        if self.kind == ONE_PER_RANK:
            return f"{ONE_PER_RANK} ({ranks} on {gpus})"
        return f"{CPU} ({ranks})"

    def to_json(self) -> dict[str, Any]:
        hosts = sorted({r.hostname for r in self.ranks if r.hostname})
        return {"kind": self.kind, "label": self.label, "ranks": self.world, "gpus": self.gpus,
                "ranks_per_gpu": self.ranks_per_gpu, "emulated_hosts": hosts, "nccl_hosts": self.nccl_hosts}

    @property
    def nccl_hosts(self) -> int:
        """How many hosts NCCL sees (a node split over shared GPUs counts once per part)."""
        return len({r.host_id for r in self.ranks}) if any(r.host_id for r in self.ranks) else 1


def place(grid: Grid, backend: str, gpus: int, emulate_hosts: bool = False) -> Placement:
    """The ranks of ``grid`` on ``gpus`` visible GPUs (NCCL) or on the CPU (gloo).

    Nodes of a multi-node grid always get their own NCCL_HOSTID (every rank runs on this host); with
    ``emulate_hosts`` they also record emulated host names, and NCCL ranks may outnumber the GPUs
    (round-robin: rank r on GPU r mod G); without it ``check_fits`` has refused such grids before.
    """
    on_gpu = backend == "nccl" and gpus > 0  # planning.grid.check_fits refused NCCL without GPUs already
    # A node's local ranks l and l+G land on one GPU when it holds more ranks than there are GPUs: part l // G
    # keeps every NCCL host's ranks on distinct GPUs (G consecutive ranks round-robin never repeat a GPU).
    split = on_gpu and grid.ppn > gpus

    def host_id(r: int) -> str | None:
        if split:
            return emulated_hostid(grid.node_of(r), grid.local_rank_of(r) // gpus)
        return emulated_hostid(grid.node_of(r)) if grid.nodes > 1 else None

    ranks = tuple(
        RankPlace(
            rank=r,
            node=grid.node_of(r),
            local_rank=grid.local_rank_of(r),
            device=(r % gpus) if on_gpu else None,
            host_id=host_id(r),
            hostname=emulated_hostname(grid.node_of(r)) if emulate_hosts else None,
        )
        for r in range(grid.world)
    )
    if not on_gpu:
        return Placement(CPU, ranks, 0, emulate_hosts)
    used = min(gpus, grid.world)
    return Placement(SHARED_GPU if grid.world > gpus else ONE_PER_RANK, ranks, used, emulate_hosts)


def rank_memory_bytes(buffer_bytes: int) -> int:
    """What one rank is expected to hold on its GPU: a CUDA context, NCCL's buffers and the probe's."""
    return CUDA_CONTEXT_BYTES + NCCL_BUFFER_BYTES + max(0, int(buffer_bytes))


# where a config sets its probe sizes: the fix a memory refusal names unless the command took them from a flag
CONFIG_SIZES = "probe.bench.max_bytes"


def check_host_memory(grid: Grid, ranks_here: int, buffer_bytes: int, memory_bytes: int,
                      sizes_from: str = CONFIG_SIZES) -> None:
    """PlanError when CPU ranks' own buffers alone (probe sizes such as bench -e 1T) exceed this host's memory: the
    kernel would kill ranks, or a neighbour, instead of a result. ``memory_bytes`` 0 (unknown) refuses nothing.
    ``sizes_from``: what sets the sizes where the command was given them (bench -e, --pair-size), for the fix."""
    if memory_bytes > 0 and ranks_here * buffer_bytes > memory_bytes:
        fit = memory_bytes // max(1, ranks_here) // 4
        raise PlanError(f"grids: {grid.label} runs {ranks_here} CPU ranks here needing {ranks_here * buffer_bytes / GIB:.1f} "
                        f"GiB of buffers ({buffer_bytes / GIB:.2f} GiB each) but this host has {memory_bytes / GIB:.1f} GiB; "
                        f"allowed: probe sizes up to about {fit >> 20} MiB ({sizes_from}) or fewer ranks")


def check_capacity(placement: Placement, grid: Grid, capacity: Sequence[Mapping[str, Any]], buffer_bytes: int) -> None:
    """PlanError (exit 2, one line) when the GPUs cannot hold the ranks placed on them.

    ``capacity``: per visible GPU ``{"compute_mode": ..., "memory_mib": ...}`` (execution.hostinfo.gpu_capacity);
    unknown values refuse nothing. Only shared placements are checked: one rank per GPU is what every
    NCCL program does.
    """
    if not placement.shared:
        return
    per_rank = rank_memory_bytes(buffer_bytes)
    for device in range(placement.gpus):
        facts = capacity[device] if device < len(capacity) else {}
        ranks = sum(1 for r in placement.ranks if r.device == device)
        mode = str(facts.get("compute_mode") or "")
        if mode in SINGLE_CONTEXT_MODES:
            raise PlanError(f"grids: {grid.label} shares GPU {device} among {ranks} ranks but its compute mode is {mode} "
                            f"(one process per GPU); allowed: a GPU in Default compute mode "
                            f"(nvidia-smi -c DEFAULT), or grids of at most {placement.gpus if mode != 'Prohibited' else 0} ranks")
        total_mib = facts.get("memory_mib")
        if isinstance(total_mib, int) and ranks * per_rank > total_mib * (1 << 20):
            fit = (total_mib * (1 << 20)) // per_rank
            raise PlanError(f"grids: {grid.label} puts {ranks} ranks on GPU {device} needing about "
                            f"{ranks * per_rank / GIB:.1f} GiB ({per_rank / GIB:.2f} GiB each: CUDA context, NCCL and probe "
                            f"buffers) but it has {total_mib / 1024:.1f} GiB; allowed: at most {fit} ranks per GPU, "
                            f"or smaller probe sizes ({CONFIG_SIZES})")
