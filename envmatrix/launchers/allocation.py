"""Batch allocations (Slurm, PBS) read from env and nodefile text: pure parsing and grid checks.

Nothing here reads files or runs commands; callers pass ``PBS_NODEFILE``'s text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

from envmatrix.errors import ConfigError, PlanError
from envmatrix.planning.grid import Grid


@dataclass(frozen=True)
class Allocation:
    scheduler: str  # "slurm" | "pbs"
    job_id: str
    nodes: tuple[str, ...]
    gpus_per_node: Optional[int] = None

    @property
    def label(self) -> str:
        return f"{'Slurm' if self.scheduler == 'slurm' else 'PBS'} job {self.job_id}"


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets: 'a[1-2],b' -> ['a[1-2]', 'b']."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ConfigError(f"SLURM_JOB_NODELIST: unbalanced brackets in {text!r}; allowed: e.g. node[01-03,07]")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _expand_range(body: str, text: str) -> list[str]:
    out = []
    for item in body.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+))?\s*", item)
        if not m:
            raise ConfigError(f"SLURM_JOB_NODELIST: bad range {item!r} in {text!r}; allowed: e.g. node[01-03,07]")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise ConfigError(f"SLURM_JOB_NODELIST: descending range {item!r} in {text!r}")
        width = len(lo)
        out += [str(i).zfill(width) for i in range(int(lo), int(hi) + 1)]
    return out


def expand_nodelist(text: str) -> list[str]:
    """Slurm hostlist syntax: 'node[01-03,07],gpu[1-2]-ib' -> node01 node02 node03 node07 gpu1-ib gpu2-ib."""
    hosts: list[str] = []
    for part in _split_top(text or ""):
        names = [""]
        for literal, body in re.findall(r"([^\[]*)(?:\[([^\]]*)\])?", part):
            names = [n + literal for n in names]
            if body:
                names = [n + x for n in names for x in _expand_range(body, text)]
        hosts += [n for n in names if n]
    return list(dict.fromkeys(hosts))


def parse_gpu_count(text: Optional[str]) -> Optional[int]:
    """'4', 'gpu:4', 'a100:4', 'gpu:a100:4', '4(x2)', '0,1,2,3' (SLURM_JOB_GPUS) -> 4; None if unknown."""
    if not text:
        return None
    first = text.split("(")[0].strip()
    if "," in first and all(p.strip().isdigit() for p in first.split(",")):
        return len(first.split(","))
    last = first.split(",")[0].split(":")[-1]
    return int(last) if last.isdigit() else None


def parse_nodefile(text: str) -> tuple[str, ...]:
    """PBS_NODEFILE: one line per slot; distinct hosts in order."""
    return tuple(dict.fromkeys(line.strip() for line in text.splitlines() if line.strip()))


def detect(env: Mapping[str, str], read_text: Optional[Callable[[str], str]] = None) -> Optional[Allocation]:
    """The allocation this process runs in, or None. ``read_text(path)`` reads PBS_NODEFILE."""
    if env.get("SLURM_JOB_ID"):
        nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
        nodes = tuple(expand_nodelist(nodelist))
        count = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")
        if count and count.isdigit() and len(nodes) != int(count):
            raise ConfigError(
                f"SLURM_JOB_NODELIST: {nodelist!r} expands to {len(nodes)} hosts but SLURM_JOB_NUM_NODES={count}"
            )
        gpus = parse_gpu_count(env.get("SLURM_GPUS_ON_NODE")) or parse_gpu_count(env.get("SLURM_GPUS_PER_NODE")) \
            or parse_gpu_count(env.get("SLURM_JOB_GPUS"))
        return Allocation("slurm", env["SLURM_JOB_ID"], nodes, gpus)
    if env.get("PBS_JOBID"):
        nodes: tuple[str, ...] = ()
        path = env.get("PBS_NODEFILE")
        if path and read_text is not None:
            try:
                nodes = parse_nodefile(read_text(path))
            except OSError as exc:
                raise ConfigError(f"PBS_NODEFILE: cannot read {path} ({exc.strerror or exc})") from None
        gpus = parse_gpu_count(env.get("PBS_NGPUS") or env.get("NGPUS"))
        return Allocation("pbs", env["PBS_JOBID"], nodes, gpus)
    return None


def check_grids(grids: Sequence[Grid], backend: str, alloc: Allocation, emulate: bool = False) -> None:
    """PlanError (exit 2, one line) for the first grid the allocation cannot hold.

    ``emulate``: nodes are emulated on the allocation's one host (NCCL_HOSTID per node), so the
    whole world must fit there.
    """
    have = len(alloc.nodes)
    for grid in grids:
        fits = []
        if emulate:
            if backend == "nccl" and alloc.gpus_per_node is not None and grid.world > alloc.gpus_per_node:
                raise PlanError(
                    f"grids: {grid.label} emulated on one node needs {grid.world} GPUs but {alloc.label} has "
                    f"{alloc.gpus_per_node} per node; allowed: grids with nodes x ppn <= {alloc.gpus_per_node}"
                )
            continue
        if have and grid.nodes > have:
            fits = f"nodes <= {have}"
            raise PlanError(
                f"grids: {grid.label} needs {grid.nodes} nodes but {alloc.label} has {have} "
                f"({','.join(alloc.nodes[:4])}{',...' if have > 4 else ''}); allowed: grids with {fits}"
            )
        if backend == "nccl" and alloc.gpus_per_node is not None and grid.ppn > alloc.gpus_per_node:
            raise PlanError(
                f"grids: {grid.label} needs {grid.ppn} GPUs per node but {alloc.label} has {alloc.gpus_per_node}; "
                f"allowed: grids with ppn <= {alloc.gpus_per_node}"
            )
