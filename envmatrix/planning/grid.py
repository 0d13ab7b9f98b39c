"""node x ppn grids, as seed 003's rows (1x4, 2x1, 2x2, 2x4)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from envmatrix.errors import ConfigError
from envmatrix.values import first_repeat

_GRID = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")


@dataclass(frozen=True, order=True)
class Grid:
    nodes: int
    ppn: int

    @property
    def world(self) -> int:
        return self.nodes * self.ppn

    @property
    def label(self) -> str:
        return f"{self.nodes}x{self.ppn}"

    def __str__(self) -> str:
        return self.label

    def node_of(self, rank: int) -> int:
        return rank // self.ppn

    def local_rank_of(self, rank: int) -> int:
        return rank % self.ppn


def parse_grid(text: Any, where: str = "grids") -> Grid:
    match = _GRID.match(str(text))
    if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise ConfigError(
            f"{where}: {text!r} is not a grid; allowed: NxP with N nodes and P processes per node, "
            "both >= 1 (e.g. 1x4, 2x2)"
        )
    return Grid(int(match.group(1)), int(match.group(2)))


def parse_grids(value: Any, where: str = "grids") -> list[Grid]:
    if value is not None and not isinstance(value, (str, list, tuple)):
        raise ConfigError(f"{where}: {value!r} is not a list of grids; allowed: a list such as grids=[1x2,2x2], "
                          "one grid such as 1x2, or auto")
    items = [value] if isinstance(value, str) else list(value or [])
    if not items:
        raise ConfigError(f"{where}: empty; give a list such as grids=[1x2,2x2] or grids=auto")
    grids = [parse_grid(item, f"{where}[{i}]") for i, item in enumerate(items)]
    repeat = first_repeat(grids)
    if repeat is not None:
        i, earlier = repeat
        raise ConfigError(f"{where}[{i}]: {items[i]!r} is listed twice (as {items[earlier]!r}); allowed: each grid once")
    return grids


def auto_grids(gpus: int, cpu_ranks: int = 2, hosts: int = 0) -> list[Grid]:
    """Grids that exercise intra-node, inter-node and mixed paths on this host.

    With G GPUs: 1xG (all local), Gx1 (all NET), and 2x(G/2) when G is even
    and >= 4. Without GPUs (gloo): 1x2, 2x1, 2x2. With ``hosts`` >= 2 separate
    machines of P ranks each (P = G, or ``cpu_ranks`` without GPUs here): 1xP,
    Hx1 and HxP, so no grid asks for more nodes than there are hosts.
    """
    if hosts >= 2:
        ppn = gpus if gpus > 0 else cpu_ranks
        return list(dict.fromkeys([Grid(1, ppn), Grid(hosts, 1), Grid(hosts, ppn)]))
    if gpus <= 0:
        return [Grid(1, cpu_ranks), Grid(cpu_ranks, 1), Grid(2, 2)]
    if gpus == 1:
        return [Grid(1, 1)]
    grids = [Grid(1, gpus)]
    if gpus >= 4 and gpus % 2 == 0:
        grids.append(Grid(2, gpus // 2))
    grids.append(Grid(gpus, 1))
    return grids


def is_this_host(host: str, this_host: str) -> bool:
    """Whether ``host`` (a name from hosts=[...]) names the machine called ``this_host`` (socket.gethostname())."""
    if host in ("localhost", "127.0.0.1", "::1"):
        return True
    return bool(this_host) and host.lower().split(".")[0] == this_host.lower().split(".")[0]


def nodes_elsewhere(node_hosts: Sequence[str], this_host: str) -> bool:
    """The grid's nodes are other machines, this one not among them (e.g. a driver on a login node)."""
    return bool(node_hosts) and not any(is_this_host(h, this_host) for h in node_hosts)


def check_nodes(grid: Grid, node_hosts: Sequence[str]) -> None:
    """One node per host: PlanError (exit 2, one line) when ``grid`` has more nodes than hosts given."""
    from envmatrix.errors import PlanError

    if grid.nodes > len(node_hosts):
        raise PlanError(
            f"grids: {grid.label} needs {grid.nodes} hosts but {len(node_hosts)} are given "
            f"({','.join(node_hosts) or 'none'}); allowed: grids with nodes <= {len(node_hosts)}, or emulate: true"
        )


def check_fits(grids: Sequence[Grid], backend: str, gpus: int, max_cpu_ranks: int,
               node_hosts: Sequence[str] = (), this_host: str = "", emulate_hosts: bool = False) -> None:
    """PlanError (exit 2, one line) for the first grid that cannot run where its ranks go.

    ``node_hosts``: the hosts the nodes run on, one per node, when they are separate machines (a launcher
    given hosts); () when every rank runs on this host (nodes emulated), where the whole world must fit
    into this host's ``gpus`` (NCCL) or ``max_cpu_ranks`` (gloo). Across hosts each node holds ``ppn`` ranks.
    ``emulate_hosts``: ranks on this host may share GPUs (planning.placement; its check_capacity judges memory).
    A node's GPUs are only known from this host's count when this host has GPUs or is one of the nodes;
    a GPU-less driver elsewhere (a login node) cannot tell, so it refuses nothing on GPU count.
    """
    from envmatrix.errors import PlanError

    if node_hosts:
        per_node_gpus = gpus if gpus > 0 or not nodes_elsewhere(node_hosts, this_host) else None
        for grid in grids:
            check_nodes(grid, node_hosts)
            if backend == "nccl" and per_node_gpus is not None and grid.ppn > per_node_gpus:
                raise PlanError(
                    f"grids: {grid.label} needs {grid.ppn} GPUs per node for NCCL (one rank per GPU) but "
                    f"{per_node_gpus} are visible on this host, taken as each node's count; "
                    f"allowed: grids with ppn <= {per_node_gpus}"
                )
            if backend == "gloo" and grid.ppn > max_cpu_ranks:
                raise PlanError(
                    f"grids: {grid.label} starts {grid.ppn} gloo ranks per node; "
                    f"allowed at most {max_cpu_ranks} (raise max_local_ranks=N to allow more)"
                )
        return
    for grid in grids:
        if backend == "nccl" and grid.world > gpus and not (emulate_hosts and gpus > 0):
            fitting = ", ".join(g.label for g in auto_grids(gpus)) or "none"
            raise PlanError(
                f"grids: {grid.label} needs {grid.world} GPUs for NCCL (one rank per GPU) "
                f"but {gpus} are visible; grids that fit here: {fitting}, or any grid with --emulate-hosts "
                "(ranks share the GPUs as emulated hosts)"
            )
        if backend == "gloo" and grid.world > max_cpu_ranks:
            raise PlanError(
                f"grids: {grid.label} starts {grid.world} gloo ranks on this host; "
                f"allowed at most {max_cpu_ranks} (raise max_local_ranks=N to allow more)"
            )
