"""Rank side of "who talks to whom": peer-group all-to-all (all, rail, cross) and pair measurements in rounds.

Nothing here chooses peers: the driver plans them (planning/peers.py, planning/pairs.py) and the bench spec carries
the plan (``BenchContext.peer_plans``, ``BenchContext.pair_rounds``); a rank executes its part and records it with
each row. Every message carries its sender in its values (``stamp``), so the receiver's check proves who sent what:
``heard_from`` is decoded from the bytes that arrived, not copied from the plan.

Rail traffic runs on communicator splits (``dist.split_group`` where the default group is bound to a GPU, which is
``ncclCommSplit`` underneath; ``dist.new_group`` otherwise, e.g. gloo); cross and all on the world group. Each
window of a peer plan is one grouped send/recv (``batch_isend_irecv``), completed before the next one starts, so
the in-flight limit is the window size.
"""

from __future__ import annotations

from typing import Any, Optional

# the rows that run a peer plan (they need a peer: skipped on one rank, like p2p)
PEER_ROWS = ("alltoall_all", "alltoall_rail", "alltoall_cross")
# Values stay exact small integers in every dtype the bench offers (bfloat16: up to 256).
_STAMP_RANKS = 64


def stamp(c: Any, count: int, src: int) -> Any:
    """Values that name their sender: ``idx % 3 + 3 * (src % 64)``; element 0 decodes back to ``src % 64``."""
    idx = c.torch.arange(count, device=c.device, dtype=c.torch.int64)
    return ((idx % 3) + 3 * (src % _STAMP_RANKS)).to(c.dtype)


def sender_of(buf: Any) -> int:
    return int(buf[0].item()) // 3


def _plan_for(c: Any, mode: str) -> dict[str, Any]:
    grid = f"{c.world // c.ppn}x{c.ppn}"
    plans = c.peer_plans or {}
    if plans.get("grid") != grid or mode not in plans:
        raise ValueError(f"alltoall_{mode}: the bench spec has no {mode} peer plan for grid {grid} "
                         f"(it has {plans.get('grid')!r}: the driver plans peers, envmatrix bench --peers {mode})")
    return plans[mode]


def _group_for(c: Any, groups: Optional[list[list[int]]]) -> tuple[Any, str]:
    """This rank's communicator for a plan: the world (None) or its part of a split, created once per split."""
    if not groups:
        return None, "world"
    key = tuple(tuple(g) for g in groups)
    if key not in c.subgroups:
        dist = c.dist
        bound = getattr(dist.distributed_c10d._get_default_group(), "bound_device_id", None)
        if bound is not None and hasattr(dist, "split_group"):
            c.subgroups[key] = (dist.split_group(split_ranks=[list(g) for g in groups]), "split_group")
        else:
            mine = None
            for g in groups:  # every rank creates every group, in the same order
                made = dist.new_group(list(g))
                mine = made if c.rank in g else mine
            c.subgroups[key] = (mine, "new_group")
    return c.subgroups[key]


def _build_peer_alltoall(c: Any, count: int, mode: str):
    plan = _plan_for(c, mode)
    mine = plan["ranks"][c.rank]
    group, split = _group_for(c, plan.get("groups"))
    dist = c.dist
    sends = [peer for window in mine["windows"] for peer in window[0]]
    recvs = [src for window in mine["windows"] for src in window[1]]
    send_bufs = [stamp(c, count, c.rank) for _ in sends]
    recv_bufs = [c.torch.empty(count, dtype=c.dtype, device=c.device) for _ in recvs]

    def run(async_op=False):
        k = r = 0
        for window_sends, window_recvs in mine["windows"]:
            ops = []
            for peer in window_sends:
                ops.append(dist.P2POp(dist.isend, send_bufs[k], peer, group))
                k += 1
            for src in window_recvs:
                ops.append(dist.P2POp(dist.irecv, recv_bufs[r], src, group))
                r += 1
            for req in dist.batch_isend_irecv(ops):
                req.wait()
        return []

    message_bytes = count * c.type_size
    run.row_extra = {
        "size_bytes": message_bytes * len(sends),  # what this rank sends: seed 002's GB/s is bytes per rank / time
        "message_bytes": message_bytes,
        "messages": len(sends),
        "inflight": max(len(w[0]) for w in mine["windows"]),
        "peer_group": mode,
        "peers": list(mine["peers"]),
        "split": split,
    }

    def check():
        for buf in recv_bufs:
            buf.zero_()
        run()
        c.sync()
        wrong, heard = 0, {}
        for src, buf in zip(recvs, recv_bufs):
            wrong += int((buf != stamp(c, count, src)).sum().item())
            who = sender_of(buf)
            heard[who] = heard.get(who, 0) + message_bytes
        run.row_extra["heard_from"] = {str(k): v for k, v in sorted(heard.items())}
        return wrong

    return run, check


def build_alltoall_all(c: Any, count: int):
    return _build_peer_alltoall(c, count, "all")


def build_alltoall_rail(c: Any, count: int):
    return _build_peer_alltoall(c, count, "rail")


def build_alltoall_cross(c: Any, count: int):
    return _build_peer_alltoall(c, count, "cross")


# ---------------------------------------------------------------- pairs, in the rounds the driver planned


def default_round(c: Any) -> list[list[int]]:
    """Without a plan: seed 000's pair (rank 0 and the first rank of the next node, or rank 1 on one node)."""
    return [[0, c.ppn if c.world > c.ppn else 1]]


def my_pair(c: Any) -> Optional[tuple[int, int]]:
    for a, b in c.round_pairs or default_round(c):
        if c.rank in (a, b):
            return int(a), int(b)
    return None


def build_pair_uni(c: Any, count: int):
    """The pair's first rank sends to its second (the rounds loop runs each pair both ways); the receiver reports."""
    pair = my_pair(c)
    src, dst = pair if pair else (-1, -1)
    buf = stamp(c, count, c.rank) if c.rank == src else c.torch.empty(count, dtype=c.dtype, device=c.device)
    from envmatrix.rank.collective_timer import send_recv_run  # it imports this module's builders

    run = send_recv_run(c, buf, src, dst)
    run.reporter = dst

    def check():
        if c.rank == dst:
            buf.zero_()
        run()
        c.sync()
        return int((buf != stamp(c, count, src)).sum().item()) if c.rank == dst else 0

    return run, check


def build_pair_bidir(c: Any, count: int):
    """Both ranks of the pair send and receive at once; the size is both directions together."""
    pair = my_pair(c)
    src, dst = pair if pair else (-1, -1)
    peer = dst if c.rank == src else src
    send = stamp(c, count, c.rank)
    recv = c.torch.empty(count, dtype=c.dtype, device=c.device)

    def run(async_op=False):
        if pair is None:
            return []
        ops = [c.dist.P2POp(c.dist.isend, send, peer), c.dist.P2POp(c.dist.irecv, recv, peer)]
        for req in c.dist.batch_isend_irecv(ops):
            req.wait()
        return []

    run.reporter = src
    run.row_extra = {"size_bytes": 2 * count * c.type_size}

    def check():
        recv.zero_()
        run()
        c.sync()
        return int((recv != stamp(c, count, peer)).sum().item()) if pair else 0

    return run, check


def build_pair_latency(c: Any, count: int):
    """Ping-pong: first rank sends, second answers; one call is a round trip, the row's time half of it."""
    pair = my_pair(c)
    src, dst = pair if pair else (-1, -1)
    ping = stamp(c, count, c.rank)
    pong = c.torch.empty(count, dtype=c.dtype, device=c.device)

    def run(async_op=False):
        if c.rank == src:
            c.dist.send(ping, dst)
            c.dist.recv(pong, dst)
        elif c.rank == dst:
            c.dist.recv(pong, src)
            c.dist.send(ping, src)
        return []

    run.reporter = src
    run.time_scale = 0.5

    def check():
        pong.zero_()
        run()
        c.sync()
        if pair is None:
            return 0
        return int((pong != stamp(c, count, dst if c.rank == src else src)).sum().item())

    return run, check


def run_pairwise(c: Any, name: str, sizes: list[int], iters: int, warmup: int, check: bool) -> list[dict[str, Any]]:
    """One pair pattern over every size and round: a round's pairs run at the same time, rounds one after another;
    ``pair_uni`` runs each pair one way and then the other."""
    import statistics

    from envmatrix.bench.sizes import aligned_count
    from envmatrix.rank.collective_timer import BUILDERS, barrier, timed_blocking

    rows = []
    rounds = c.pair_rounds or [default_round(c)]
    for size in sizes:
        count = aligned_count(size, c.type_size, c.world, False)
        for number, pairs in enumerate(rounds):
            ways = [pairs, [[b, a] for a, b in pairs]] if name == "pair_uni" else [pairs]
            for way in ways:
                c.round_pairs = way
                if c.enter is not None:
                    c.enter(f"{name}@{size} round {number}")
                run, verify = BUILDERS[name](c, count)
                barrier(c)
                for _ in range(warmup):
                    run()
                c.sync()
                barrier(c)
                scale = getattr(run, "time_scale", 1.0)
                times = [t * scale for t in timed_blocking(c, run, iters)]
                wrong = verify() if check else None
                pair = my_pair(c)
                c.round_pairs = None
                if pair is None or c.rank != run.reporter:
                    continue
                rows.append({
                    "collective": name, "size_bytes": count * c.type_size, "count": count,
                    "dtype": str(c.dtype).replace("torch.", ""), "iters": iters, "warmup": warmup,
                    "time_us": sum(times) / len(times), "timing": "blocking", "launch": "torch", "buffers": "torch",
                    "capture": None, "loop": None, "in_place": False, "time_min_us": min(times),
                    "time_median_us": statistics.median(times), "time_max_us": max(times), "wrong": wrong,
                    "rank": c.rank, "pair": list(pair), "round": number, **getattr(run, "row_extra", {}),
                })
    return rows
