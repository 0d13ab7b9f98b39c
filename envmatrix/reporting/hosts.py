"""Results grouped by the host each rank ran on (pure): the per-host view of console, markdown and HTML reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from envmatrix.results import PASS, PEER_KILLED, ProbeResult


@dataclass
class HostRow:
    host: str
    runs: int = 0  # runs with at least one rank there
    ranks: int = 0  # rank records there
    failed_ranks: int = 0  # ranks that failed themselves (not pass, not stopped after a peer failed)
    root_causes: int = 0  # failed runs whose root-cause rank ran there
    gpus: list[str] = field(default_factory=list)  # GPU UUIDs seen ("cpu" for CPU ranks)
    nics: list[str] = field(default_factory=list)


def root_cause_host(result: ProbeResult) -> Optional[str]:
    cause = result.root_cause or {}
    if cause.get("host"):  # the launcher's or the rank's own word (engine.launch), e.g. the host a daemon failed on
        return cause["host"]
    rank = cause.get("rank")
    return next((r.hostname for r in result.ranks if r.rank == rank), None) if rank is not None else None


def host_rows(results: Sequence[ProbeResult]) -> list[HostRow]:
    """One row per host, hosts in the order they first appear; empty when no rank recorded a hostname."""
    rows: dict[str, HostRow] = {}
    for result in results:
        seen = set()
        for rank in result.ranks:
            if not rank.hostname:
                continue
            row = rows.setdefault(rank.hostname, HostRow(rank.hostname))
            row.ranks += 1
            row.failed_ranks += rank.outcome not in (PASS, PEER_KILLED)
            for values, value in ((row.gpus, rank.gpu_uuid), (row.nics, rank.nic)):
                if value and value not in values:
                    values.append(value)
            seen.add(rank.hostname)
        for host in seen:
            rows[host].runs += 1
        culprit = None if result.passed else root_cause_host(result)
        if culprit in rows:
            rows[culprit].root_causes += 1
    return list(rows.values())


HOST_COLUMNS = ("host", "runs", "ranks", "failed ranks", "root causes", "GPUs", "NICs")


def host_cells(row: HostRow) -> tuple[str, ...]:
    return (row.host, str(row.runs), str(row.ranks), str(row.failed_ranks), str(row.root_causes),
            ",".join(row.gpus) or "-", ",".join(row.nics) or "-")


def algorithms_line(nccl: dict[str, Any]) -> str:
    """``AllReduce RING/SIMPLE x12, TREE/LL x3; AllGather RING/LL128 x1`` from NCCL's TUNING lines; "" without."""
    parts = []
    for collective, picks in (nccl.get("algorithms") or {}).items():
        parts.append(f"{collective} " + ", ".join(f"{k} x{n}" for k, n in sorted(picks.items(), key=lambda kv: -kv[1])))
    return "; ".join(parts)
