"""Packing: which runs go at the same time, on which GPUs (pure; no processes).

Runs that need fewer GPUs than the host has run side by side on disjoint
CUDA_VISIBLE_DEVICES sets (each gets its own port from the runner). On CPU the
lanes are bounded by cores. Bench runs time shared links, so ``auto`` never
packs them; only an explicit ``--jobs N`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from envmatrix.planning.plan import Run


@dataclass(frozen=True)
class Packed:
    run: Run
    cuda_visible: Optional[str] = None  # None: the host's devices as they are

    def env(self, inherited: Mapping[str, str]) -> dict[str, str]:
        if self.cuda_visible is None:
            return dict(inherited)
        return {**inherited, "CUDA_VISIBLE_DEVICES": self.cuda_visible}

    def gpus(self, host_gpus: int) -> int:
        return host_gpus if self.cuda_visible is None else len(self.cuda_visible.split(","))


def parse_jobs(value: str) -> int | str:
    """--jobs N|auto; raises ValueError naming what is allowed."""
    if value == "auto":
        return value
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise ValueError(f"--jobs {value!r}: allowed are a whole number >= 1 or 'auto'")


def lanes(run: Run, backend: str, gpus: int, jobs: int | str, cores: int) -> int:
    """How many runs like this one fit side by side."""
    if jobs == 1:
        return 1
    if jobs == "auto" and run.probe.params.get("bench"):
        return 1
    world = run.grid.world
    fit = gpus // world if backend == "nccl" else max(1, cores // world)
    return max(1, fit if jobs == "auto" else min(int(jobs), fit))


def pack_batches(
    runs: Sequence[Run], backend: str, gpus: int, jobs: int | str, cores: int, visible: Optional[str] = None
) -> list[list[Packed]]:
    """Consecutive batches of runs started together; each batch's GPU sets are disjoint."""
    devices = visible.split(",") if visible else [str(i) for i in range(gpus)]
    batches: list[list[Packed]] = []
    i = 0
    while i < len(runs):
        n = lanes(runs[i], backend, gpus, jobs, cores)
        # Only runs of one world size share a batch, so the device split stays simple.
        batch = [runs[i]]
        while len(batch) < n and i + len(batch) < len(runs) and runs[i + len(batch)].grid.world == runs[i].grid.world:
            batch.append(runs[i + len(batch)])
        if len(batch) == 1 or backend != "nccl":
            batches.append([Packed(r) for r in batch])
        else:
            w = runs[i].grid.world
            batches.append([Packed(r, ",".join(devices[k * w:(k + 1) * w])) for k, r in enumerate(batch)])
        i += len(batch)
    return batches
