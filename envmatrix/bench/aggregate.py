"""Per-rank bench rows -> one row per (collective, size), nccl-tests style.

nccl-tests (-a 1, its default) averages each rank's mean time before computing
bandwidth; so do we. #wrong is summed over ranks, like its #wrong column.
min/median/max span every rank's samples (its per-call times when timed call
by call, else its one window mean), so the reported time lies between them.
Rows keep the order collectives were asked in (``-c``), sizes ascending.
"""

from __future__ import annotations

import statistics
from typing import Any, Iterable, Mapping, Optional

from envmatrix.bench.formulas import ALL, bandwidths
from envmatrix.bench.sizes import printed_count


def headline_rows(metrics: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Per (collective, size, dtype), the out-of-place row where there is one, else the in-place row, in input
    order. Why per point: nccl-tests' headline is its out-of-place column, but torch's own allreduce, broadcast and
    reduce only run in place, so a run may hold in-place rows for some collectives and out-of-place for others."""
    chosen: dict[tuple, Mapping[str, Any]] = {}
    for m in metrics:
        key = (m.get("collective"), m.get("size_bytes"), m.get("dtype"))
        if key not in chosen or (chosen[key].get("in_place") and not m.get("in_place")):
            chosen[key] = m
    return list(chosen.values())


def headline_bw(m: Mapping[str, Any]) -> Optional[float]:
    """busbw, or algbw for patterns without a bus-bandwidth factor (ps_central, ps_sharded)."""
    return m.get("busbw_gbps") if m.get("busbw_gbps") is not None else m.get("algbw_gbps")


def _printed(collective: str, count: Optional[int], ranks: int) -> Optional[int]:
    """A rank's element count (its whole buffer) as nccl-tests' count column, the one its parser stores."""
    spec = ALL.get(collective)
    if count is None or spec is None or spec.nccl_tests_binary is None:
        return count
    return printed_count(count, ranks, spec.split_by_ranks)


def _wrong(rows: list[dict[str, Any]]) -> Optional[int]:
    """#wrong summed over ranks; None ("N/A", as nccl-tests -c 0 prints) where no rank checked its values."""
    checked = [int(r["wrong"]) for r in rows if r.get("wrong") is not None]
    return sum(checked) if checked else None


def aggregate_rows(rank_rows: Iterable[dict[str, Any]], ranks: int) -> list[dict[str, Any]]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rank_rows:
        pair = tuple(row["pair"]) if row.get("pair") else None  # pair tests: one row per (ordered) pair
        groups.setdefault((row["collective"], row["size_bytes"], row.get("dtype", "float32"), pair), []).append(row)
    out = []
    for (collective, size, dtype, _), rows in groups.items():
        time_us = statistics.fmean(r["time_us"] for r in rows)
        algbw, busbw = bandwidths(collective, size, time_us, ranks)
        out.append(
            {
                "collective": collective,
                "size_bytes": size,
                "count": _printed(collective, rows[0].get("count"), ranks),
                "dtype": dtype,
                "in_place": bool(rows[0].get("in_place")),  # torch's own allreduce/broadcast/reduce
                "time_us": time_us,
                "time_min_us": min(r["time_min_us"] for r in rows),
                "time_median_us": statistics.median(r["time_median_us"] for r in rows),
                "time_max_us": max(r["time_max_us"] for r in rows),
                "algbw_gbps": algbw,
                "busbw_gbps": busbw,
                "wrong": _wrong(rows),
                "ranks_reporting": len(rows),
                "iters": rows[0].get("iters"),
                "timing": rows[0].get("timing"),
                "launch": rows[0].get("launch"),  # direct (into libnccl) or torch's call path
                "buffers": rows[0].get("buffers"),  # ncclMemAlloc (as nccl-tests) or torch's allocator
                "capture": rows[0].get("capture"),  # graph timing: cudart (as nccl-tests -G) or torch.cuda.graph
                "graph_nodes": rows[0].get("graph_nodes"),  # the cudart graph's nodes by type, e.g. kernel:20
                "loop": rows[0].get("loop"),  # host/graph windows of direct launches: compiled (as nccl-tests) or python
                "source": "envmatrix",
                **_who_talked(rows),
            }
        )
    order = {c: i for i, c in enumerate(dict.fromkeys(c for c, _, _, _ in groups))}
    out.sort(key=lambda r: (order[r["collective"]], r["size_bytes"]))
    return out


def _who_talked(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Peer patterns and pair tests (rank/peer_patterns.py): the pair, or each rank's peers and whom it heard."""
    first = rows[0]
    out = {k: first[k] for k in ("pair", "round", "peer_group", "message_bytes", "messages", "inflight", "split")
           if first.get(k) is not None}
    if first.get("peers") is not None:
        out["peers_by_rank"] = {str(r["rank"]): r.get("peers") for r in rows}
        out["heard_from_by_rank"] = {str(r["rank"]): r.get("heard_from") for r in rows if r.get("heard_from") is not None}
    return out
