"""Peer groups of an NxP grid for all-to-all traffic: all, rail-aligned, cross-rail (pure).

Seed 002's definitions and its rule. ``rail``: a rank exchanges only with the ranks of the same local rank on the
other nodes (its rail); ``cross``: with any rank on the other nodes; ``all``: with every other rank. Rail and cross
keep the same bytes, the same number of messages and the same in-flight limit per rank, so only the choice of
peers differs: each rank posts ``(N - 1) * P`` messages of the message size, one to each cross peer, or ``P`` to
each of its ``N - 1`` rail peers. ``all`` posts one message to each of the ``N * P - 1`` other ranks.

Messages go out in windows of at most ``inflight`` (default: all of them at once, one grouped send/recv); a window
holds, for each rank, the receives matching what its peers send in that same window, so every window is a
closed exchange and any limit is deadlock free. The rank side executes the plan as given (``to_spec``); it never
works out peers itself, so what the records say talked is what the planner chose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from envmatrix.errors import ConfigError

MODES = ("all", "rail", "cross")


@dataclass(frozen=True)
class RankPeers:
    rank: int
    peers: tuple[int, ...]  # every rank this one sends to (and receives from), ascending
    sends: tuple[int, ...]  # the destination of each message, in posting order
    windows: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]  # per window: (send destinations, recv sources)

    def bytes_per_peer(self, message_bytes: int) -> dict[int, int]:
        out: dict[int, int] = {}
        for peer in self.sends:
            out[peer] = out.get(peer, 0) + message_bytes
        return out


def peers_of(rank: int, nodes: int, ppn: int, mode: str) -> tuple[int, ...]:
    node, local = divmod(rank, ppn)
    if mode == "all":
        return tuple(r for r in range(nodes * ppn) if r != rank)
    if mode == "rail":
        return tuple(n * ppn + local for n in range(nodes) if n != node)
    if mode == "cross":
        return tuple(r for r in range(nodes * ppn) if r // ppn != node)
    raise ConfigError(f"--peers: {mode!r} not allowed; allowed: {', '.join(MODES)}")


def messages_per_rank(nodes: int, ppn: int, mode: str) -> int:
    """Rail and cross: ``(N - 1) * P`` each (seed 002's same-count rule); all: one per other rank."""
    return nodes * ppn - 1 if mode == "all" else (nodes - 1) * ppn


def check_grid(nodes: int, ppn: int, mode: str) -> None:
    if mode not in MODES:
        raise ConfigError(f"--peers: {mode!r} not allowed; allowed: {', '.join(MODES)}")
    if mode != "all" and nodes < 2:
        raise ConfigError(f"--peers {mode}: grid {nodes}x{ppn} has one node; allowed: a grid of 2 or more nodes "
                          "(rail and cross peers live on other nodes)")
    if nodes * ppn < 2:
        raise ConfigError(f"--peers {mode}: grid {nodes}x{ppn} has one rank; allowed: 2 or more ranks")


def peer_plan(nodes: int, ppn: int, mode: str, inflight: Optional[int] = None) -> list[RankPeers]:
    """Each rank's peers, message destinations and windows for ``mode`` on an NxP grid."""
    check_grid(nodes, ppn, mode)
    world, total = nodes * ppn, messages_per_rank(nodes, ppn, mode)
    if inflight is not None and (not isinstance(inflight, int) or inflight < 1):
        raise ConfigError(f"--inflight: {inflight!r} not allowed; allowed: an integer >= 1")
    limit = min(inflight or total, total)
    peers = [peers_of(r, nodes, ppn, mode) for r in range(world)]
    # round robin over the peers, so any window spreads over them as evenly as it can
    sends = [tuple(p[k % len(p)] for k in range(total)) for p in peers]
    plans = []
    for r in range(world):
        windows = []
        for start in range(0, total, limit):
            ks = range(start, min(start + limit, total))
            windows.append((tuple(sends[r][k] for k in ks), tuple(q for k in ks for q in range(world) if sends[q][k] == r)))
        plans.append(RankPeers(r, peers[r], sends[r], tuple(windows)))
    return plans


def split_groups(nodes: int, ppn: int, mode: str) -> Optional[list[list[int]]]:
    """The communicator split a mode runs on: rail -> one group per local rank (its rail); else None (the world)."""
    check_grid(nodes, ppn, mode)
    if mode != "rail":
        return None
    return [[n * ppn + local for n in range(nodes)] for local in range(ppn)]


def to_spec(nodes: int, ppn: int, modes: list[str], inflight: Optional[int] = None) -> dict[str, Any]:
    """What a rank is told (JSON): per mode, its groups and every rank's peers and windows."""
    out: dict[str, Any] = {"grid": f"{nodes}x{ppn}"}
    for mode in modes:
        plans = peer_plan(nodes, ppn, mode, inflight)
        out[mode] = {
            "messages": messages_per_rank(nodes, ppn, mode),
            "inflight": max(len(w[0]) for w in plans[0].windows),
            "groups": split_groups(nodes, ppn, mode),
            "ranks": [{"peers": list(p.peers), "windows": [[list(s), list(r)] for s, r in p.windows]} for p in plans],
        }
    return out
