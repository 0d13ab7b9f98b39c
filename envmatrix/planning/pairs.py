"""Who measures with whom: host pair rounds and the GPU pairs of one host (pure).

Host pairs run as fleet health checks run them (superbench, Azure's node checks): ``n - 1`` rounds of ``n / 2``
disjoint pairs, every pair exactly once, each host in at most one pair per round, so a round's pairs run at the
same time without sharing a host. The schedule is the circle method (round-robin tournament): host 0 stays put,
the others rotate one seat per round; an odd count gets a bye seat (``None``), so the host facing it sits the
round out. GPU pairs run one at a time (they share a box's PCIe switches and NVLink fabric), each unordered pair
once; both directions are measured inside it, which gives every ordered pair.
"""

from __future__ import annotations

from itertools import combinations
from typing import Optional, Sequence

from envmatrix.errors import ConfigError

Pair = tuple[int, int]


def host_pair_rounds(hosts: int) -> list[list[Pair]]:
    """Rounds of disjoint pairs of ``range(hosts)``: ``hosts - 1`` rounds (``hosts`` when odd), every pair once."""
    if hosts < 2:
        raise ConfigError(f"pairs: {hosts} host(s) given; allowed: 2 or more hosts (a pair needs two)")
    seats: list[Optional[int]] = list(range(hosts)) + ([None] if hosts % 2 else [])
    n = len(seats)
    rounds = []
    for _ in range(n - 1):
        pairs = []
        for i in range(n // 2):
            a, b = seats[i], seats[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(pairs)  # in seat order: the first round pairs the first half with the second half
        seats = [seats[0], seats[-1], *seats[1:-1]]  # rotate every seat but the first
    return rounds


def gpu_pair_rounds(gpus: int, only: Optional[Sequence[Pair]] = None) -> list[list[Pair]]:
    """One pair per round: every unordered pair of ``range(gpus)``, or the pairs of ``only`` (ordered pairs given
    either way round are measured once, both directions)."""
    if gpus < 2:
        raise ConfigError(f"--pairs gpus: {gpus} GPU(s) visible; allowed: 2 or more (a GPU pair needs two GPUs)")
    if only is None:
        return [[pair] for pair in combinations(range(gpus), 2)]
    chosen: list[Pair] = []
    for a, b in only:
        if a == b or not (0 <= a < gpus and 0 <= b < gpus):
            raise ConfigError(f"--gpu-pairs: {a},{b} not allowed; allowed: two different GPUs of 0..{gpus - 1}")
        pair = (min(a, b), max(a, b))
        if pair not in chosen:
            chosen.append(pair)
    return [[pair] for pair in chosen]


def parse_gpu_pairs(text: str) -> list[Pair]:
    """``0-3,1-7`` (or ``0:3``) -> [(0, 3), (1, 7)]."""
    pairs = []
    for item in (p.strip() for p in text.split(",")):
        parts = item.replace(":", "-").split("-")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ConfigError(f"--gpu-pairs: {item!r} not allowed; allowed: GPU pairs such as 0-3,1-7")
        pairs.append((int(parts[0]), int(parts[1])))
    return pairs


def ordered_pairs(rounds: Sequence[Sequence[Pair]]) -> list[Pair]:
    """Every ordered pair the rounds measure: (a, b) and (b, a) per scheduled pair, in schedule order."""
    return [p for pairs in rounds for a, b in pairs for p in ((a, b), (b, a))]


def check_rounds(rounds: Sequence[Sequence[Pair]], members: int) -> None:
    """Raise ValueError unless each round's pairs are disjoint and no pair repeats (a planner's invariant)."""
    seen: set[frozenset] = set()
    for i, pairs in enumerate(rounds):
        used = [h for pair in pairs for h in pair]
        if len(used) != len(set(used)) or any(not 0 <= h < members for h in used):
            raise ValueError(f"round {i}: pairs {pairs} share a member or leave 0..{members - 1}")
        for pair in pairs:
            key = frozenset(pair)
            if key in seen:
                raise ValueError(f"round {i}: pair {pair} already measured")
            seen.add(key)
