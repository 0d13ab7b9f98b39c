"""Pure planners of issue 34: host pair rounds, GPU pairs, peer groups (rail, cross, all)."""

from itertools import combinations

import pytest

from envmatrix.errors import ConfigError
from envmatrix.planning.pairs import (check_rounds, gpu_pair_rounds, host_pair_rounds, ordered_pairs,
                                      parse_gpu_pairs)
from envmatrix.planning.peers import messages_per_rank, peer_plan, split_groups, to_spec


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 16])
def test_host_rounds_every_pair_once_disjoint(n):
    rounds = host_pair_rounds(n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    check_rounds(rounds, n)
    got = sorted(p for r in rounds for p in r)
    assert got == sorted(combinations(range(n), 2))
    for r in rounds:
        assert len(r) == n // 2  # everyone plays (even n); one bye per round (odd n)


def test_host_rounds_four_hosts_exact():
    assert host_pair_rounds(4) == [[(0, 3), (1, 2)], [(0, 2), (1, 3)], [(0, 1), (2, 3)]]


def test_check_rounds_catches_a_shared_member_and_a_repeat():
    with pytest.raises(ValueError, match="share"):
        check_rounds([[(0, 1), (1, 2)]], 3)
    with pytest.raises(ValueError, match="already"):
        check_rounds([[(0, 1)], [(1, 0)]], 2)


def test_one_host_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="2 or more hosts"):
        host_pair_rounds(1)


def test_gpu_pairs_one_per_round_and_ordered_both_ways():
    rounds = gpu_pair_rounds(4)
    assert all(len(r) == 1 for r in rounds) and len(rounds) == 6
    assert sorted(ordered_pairs(rounds)) == sorted((a, b) for a in range(4) for b in range(4) if a != b)
    assert gpu_pair_rounds(8, parse_gpu_pairs("0-3,3:0,1-7")) == [[(0, 3)], [(1, 7)]]
    with pytest.raises(ConfigError, match="two GPUs"):
        gpu_pair_rounds(1)
    with pytest.raises(ConfigError, match="0..3"):
        gpu_pair_rounds(4, [(0, 4)])
    with pytest.raises(ConfigError, match="0-3,1-7"):
        parse_gpu_pairs("0-a")


def _traffic(plans, message_bytes=1):
    """(src, dst) -> bytes, from the windows' sends; and check every window's receives match its peers' sends."""
    sent = {}
    for p in plans:
        for w, (sends, _) in enumerate(p.windows):
            for dst in sends:
                sent[(p.rank, dst, w)] = sent.get((p.rank, dst, w), 0) + 1
    received = {}
    for p in plans:
        for w, (_, recvs) in enumerate(p.windows):
            for src in recvs:
                received[(src, p.rank, w)] = received.get((src, p.rank, w), 0) + 1
    assert sent == received  # every window is a closed exchange: no rank waits for a send posted later
    out = {}
    for (src, dst, _), n in sent.items():
        out[(src, dst)] = out.get((src, dst), 0) + n * message_bytes
    return out


@pytest.mark.parametrize("nodes,ppn", [(2, 2), (2, 4), (3, 2), (2, 8), (4, 1)])
@pytest.mark.parametrize("inflight", [None, 1, 3])
def test_rail_and_cross_same_bytes_messages_inflight(nodes, ppn, inflight):
    rail, cross = peer_plan(nodes, ppn, "rail", inflight), peer_plan(nodes, ppn, "cross", inflight)
    for r, c in zip(rail, cross):
        node, local = divmod(r.rank, ppn)
        assert r.peers == tuple(n * ppn + local for n in range(nodes) if n != node)
        assert c.peers == tuple(q for q in range(nodes * ppn) if q // ppn != node)
        assert len(r.sends) == len(c.sends) == messages_per_rank(nodes, ppn, "rail") == (nodes - 1) * ppn
        assert sum(r.bytes_per_peer(8192).values()) == sum(c.bytes_per_peer(8192).values())
        assert [len(s) for s, _ in r.windows] == [len(s) for s, _ in c.windows]  # same in-flight limit
        assert set(r.bytes_per_peer(1)) == set(r.peers) and set(c.bytes_per_peer(1)) == set(c.peers)
    for plans in (rail, cross):
        traffic = _traffic(plans)
        assert all(traffic.get((b, a)) == n for (a, b), n in traffic.items())  # symmetric


def test_all_is_every_other_rank_and_rail_splits_by_local_rank():
    plans = peer_plan(1, 3, "all")
    assert [p.peers for p in plans] == [(1, 2), (0, 2), (0, 1)]
    assert split_groups(2, 4, "rail") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert split_groups(2, 4, "cross") is None
    with pytest.raises(ConfigError, match="2 or more nodes"):
        peer_plan(1, 4, "rail")
    with pytest.raises(ConfigError, match="allowed: all, rail, cross"):
        peer_plan(2, 2, "ring")
    with pytest.raises(ConfigError, match="inflight"):
        peer_plan(2, 2, "cross", 0)


def test_spec_carries_every_rank_plan():
    spec = to_spec(2, 2, ["rail", "cross"], inflight=1)
    assert spec["grid"] == "2x2" and spec["rail"]["groups"] == [[0, 2], [1, 3]]
    assert spec["cross"]["ranks"][0]["peers"] == [2, 3] and spec["rail"]["ranks"][0]["peers"] == [2]
    assert spec["rail"]["inflight"] == spec["cross"]["inflight"] == 1
    assert spec["rail"]["ranks"][1]["windows"] == [[[3], [3]], [[3], [3]]]


def test_env_flags_name_the_setup_env_or_name_plus_env():
    # bench and bench --pairs: without --setup the inherited env is "env" and stays so with --env (it said "env+env")
    from envmatrix.app.bench import with_env
    from envmatrix.env.atoms import Atom, Setup

    ring = (Atom("NCCL_ALGO", value="Ring"),)
    assert with_env(Setup("env"), ring, named=False) == Setup("env", ring)
    tree = Setup("tree", (Atom("NCCL_ALGO", value="Tree"), Atom("NCCL_PROTO", value="LL")))
    assert with_env(tree, ring, named=True) == Setup("tree+env", (Atom("NCCL_PROTO", value="LL"),) + ring)
    assert with_env(tree, (), named=True) == tree
