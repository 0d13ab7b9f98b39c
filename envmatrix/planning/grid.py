"""node x ppn grids, as seed 003's rows (1x4, 2x1, 2x2, 2x4)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from envmatrix.errors import ConfigError

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
    items = [value] if isinstance(value, str) else list(value or [])
    if not items:
        raise ConfigError(f"{where}: empty; give a list such as grids=[1x2,2x2] or grids=auto")
    grids = [parse_grid(item, f"{where}[{i}]") for i, item in enumerate(items)]
    return list(dict.fromkeys(grids))


def auto_grids(gpus: int, cpu_ranks: int = 2) -> list[Grid]:
    """Grids that exercise intra-node, inter-node and mixed paths on this host.

    With G GPUs: 1xG (all local), Gx1 (all NET), and 2x(G/2) when G is even
    and >= 4. Without GPUs (gloo): 1x2, 2x1, 2x2.
    """
    if gpus <= 0:
        return [Grid(1, cpu_ranks), Grid(cpu_ranks, 1), Grid(2, 2)]
    if gpus == 1:
        return [Grid(1, 1)]
    grids = [Grid(1, gpus)]
    if gpus >= 4 and gpus % 2 == 0:
        grids.append(Grid(2, gpus // 2))
    grids.append(Grid(gpus, 1))
    return grids


def check_fits(grids: Sequence[Grid], backend: str, gpus: int, max_cpu_ranks: int) -> None:
    from envmatrix.errors import PlanError

    for grid in grids:
        if backend == "nccl" and grid.world > gpus:
            fitting = ", ".join(g.label for g in auto_grids(gpus)) or "none"
            raise PlanError(
                f"grids: {grid.label} needs {grid.world} GPUs for NCCL (one rank per GPU) "
                f"but {gpus} are visible; grids that fit here: {fitting}"
            )
        if backend == "gloo" and grid.world > max_cpu_ranks:
            raise PlanError(
                f"grids: {grid.label} starts {grid.world} gloo ranks on this host; "
                f"allowed at most {max_cpu_ranks} (raise max_local_ranks=N to allow more)"
            )
