"""Rank side of issue 34 on real gloo ranks (4 processes on loopback): rail/cross/all all-to-all executes the
driver's peer plan and the received bytes prove who talked to whom; pair rounds measure every ordered pair."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from envmatrix.planning.pairs import host_pair_rounds
from envmatrix.planning.peers import peer_plan, to_spec

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch, torch.distributed as dist
    from envmatrix.rank.collective_timer import BenchContext, run_bench
    rank, world, ppn, port = (int(a) for a in sys.argv[1:5])
    bench = json.loads(sys.argv[5])
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method="tcp://127.0.0.1:%d" % port)
    ctx = BenchContext(dist, torch, torch.device("cpu"), rank, world, ppn, bench.get("dtype", "float32"))
    ctx.peer_plans, ctx.pair_rounds = bench.get("peer_plan") or {}, bench.get("pair_rounds")
    rows = run_bench(ctx, bench["collectives"], bench["sizes"], iters=2, warmup=1)
    print(json.dumps(rows), flush=True)
    dist.destroy_process_group()
    """
)


def _run(world, ppn, bench):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(r), str(world), str(ppn), str(port), json.dumps(bench)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for r in range(world)]
    rows = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-3000:]
        rows += json.loads(out.strip().splitlines()[-1])
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("nodes,ppn", [(2, 2), (2, 4)])
def test_rail_and_cross_talk_to_the_planned_peers_only(nodes, ppn):
    bench = {"collectives": ["alltoall_rail", "alltoall_cross"], "sizes": [8192, 65536],
             "peer_plan": to_spec(nodes, ppn, ["rail", "cross"]), "dtype": "bfloat16"}
    rows = _run(nodes * ppn, ppn, bench)
    assert len(rows) == 2 * 2 * nodes * ppn and all(r["wrong"] == 0 for r in rows)
    for mode in ("rail", "cross"):
        plans = peer_plan(nodes, ppn, mode)
        for r in (r for r in rows if r["collective"] == f"alltoall_{mode}"):
            planned = plans[r["rank"]]
            assert r["peers"] == list(planned.peers) and r["peer_group"] == mode
            heard = {int(k): v for k, v in r["heard_from"].items()}  # decoded from the bytes that arrived
            assert heard == planned.bytes_per_peer(r["message_bytes"])
            node, local = divmod(r["rank"], ppn)
            if mode == "rail":
                assert all(q % ppn == local and q // ppn != node for q in heard) and r["split"] == "new_group"
            else:
                assert all(q // ppn != node for q in heard) and len(heard) == (nodes - 1) * ppn
    by = {(r["collective"], r["rank"], r["message_bytes"]): r for r in rows}
    for rank in range(nodes * ppn):
        for size in (8192, 65536):
            rail, cross = by[("alltoall_rail", rank, size)], by[("alltoall_cross", rank, size)]
            assert rail["size_bytes"] == cross["size_bytes"] == (nodes - 1) * ppn * size  # same bytes per rank
            assert rail["messages"] == cross["messages"] and rail["inflight"] == cross["inflight"]


@pytest.mark.slow
def test_pair_rounds_measure_every_ordered_pair_checked():
    rounds = host_pair_rounds(4)
    bench = {"collectives": ["pair_uni", "pair_bidir", "pair_latency"], "sizes": [4096], "pair_rounds": rounds}
    rows = _run(4, 1, bench)
    assert all(r["wrong"] == 0 for r in rows)
    uni = sorted(tuple(r["pair"]) for r in rows if r["collective"] == "pair_uni")
    assert uni == sorted((a, b) for a in range(4) for b in range(4) if a != b)
    assert all(r["rank"] == r["pair"][1] for r in rows if r["collective"] == "pair_uni")  # the receiver reports
    bidir = [r for r in rows if r["collective"] == "pair_bidir"]
    assert sorted(tuple(r["pair"]) for r in bidir) == sorted(p for rd in rounds for p in rd)
    assert all(r["size_bytes"] == 2 * 4096 for r in bidir)
    rounds_of = {tuple(r["pair"]): r["round"] for r in rows if r["collective"] == "pair_latency"}
    assert rounds_of == {p: i for i, rd in enumerate(rounds) for p in rd}
