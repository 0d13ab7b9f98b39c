"""The pair outlier judgement (envmatrix/judgement/pairs.py): slow pair, slow host, slow link, GPU link classes."""

import pytest

from envmatrix.judgement.pairs import PairFigure, flag_below_class, judge_pairs
from envmatrix.planning.pairs import host_pair_rounds


def _figures(n, value_of):
    hosts = [f"node{i}" for i in range(n)]
    return [PairFigure(r, hosts[a], hosts[b], value_of(a, b)) for r, pairs in enumerate(host_pair_rounds(n))
            for a, b in pairs]


@pytest.mark.parametrize("n,bad", [(4, 2), (8, 5), (6, 0)])
def test_rate_limited_host_is_named_sure(n, bad):
    figures = _figures(n, lambda a, b: 0.02 if bad in (a, b) else 1.0 + 0.01 * a)
    j = judge_pairs(figures)
    assert j.slow_hosts == [f"node{bad}"]
    assert j.exclude_line == f"exclude: node{bad}"
    host = next(h for h in j.hosts if h.host == f"node{bad}")
    assert host.certainty.startswith("sure") and host.slow_pairs == n - 1
    assert j.slow_links == []
    assert sum(p.slow for p in j.pairs) == n - 1
    assert f"slow host node{bad}" in j.summary()


def test_one_slow_link_is_a_link_not_a_host():
    figures = _figures(6, lambda a, b: 0.1 if (a, b) == (1, 4) else 1.0)
    j = judge_pairs(figures)
    assert j.slow_hosts == [] and j.slow_links == [("node1", "node4")]
    assert j.exclude_line == "no host to exclude"  # was a bare "exclude: " line


def test_a_link_slow_once_and_fine_when_measured_again_is_not_a_slow_link():
    # CI run 104: a healthy veth pair read 4x below its round once under load, 0.56x on its recheck
    once = _figures(3, lambda a, b: 0.1 if (a, b) == (0, 1) else 1.0)
    assert judge_pairs(once).slow_links == [("node0", "node1")]
    j = judge_pairs(once + [PairFigure(1000, "node0", "node1", 0.9)])
    assert j.slow_links == [] and j.slow_hosts == [] and j.cleared_links == [("node0", "node1")]
    assert "slow link" not in j.summary() and "node0-node1 slow once, fine when measured again" in j.summary()
    twice = judge_pairs(once + [PairFigure(1000, "node0", "node1", 0.1)])
    assert twice.slow_links == [("node0", "node1")] and twice.cleared_links == []  # named once, slow every time


def test_two_hosts_cannot_tell_which_and_healthy_fleet_is_quiet():
    j = judge_pairs([PairFigure(0, "a", "b", 0.1)])
    assert j.slow_hosts == []  # one pair: the reference is itself, nothing is below it
    healthy = judge_pairs(_figures(4, lambda a, b: 1.0 + 0.05 * (a + b)))
    assert not any(p.slow for p in healthy.pairs) and healthy.summary().startswith("no slow pair")


def test_round_reference_is_the_median_of_the_other_pairs_of_its_round():
    figures = [PairFigure(0, "a", "b", 10.0), PairFigure(0, "c", "d", 4.0), PairFigure(1, "a", "c", 5.0),
               PairFigure(1, "b", "d", 5.0)]
    j = judge_pairs(figures)
    assert [p.slow for p in j.pairs] == [False, True, False, False]
    assert j.pairs[1].reference == 10.0  # never its own figure: with it, a round of two is their mean (7.0)


def test_gpu_pairs_below_their_link_class_are_flagged():
    values = {(0, 1): 100.0, (1, 0): 98.0, (0, 2): 99.0, (2, 0): 40.0, (0, 3): 20.0, (3, 0): 21.0}
    classes = {(0, 1): "NV12", (1, 0): "NV12", (0, 2): "NV12", (2, 0): "NV12", (0, 3): "SYS", (3, 0): "SYS"}
    flags = flag_below_class(values, classes)
    assert flags[(2, 0)] == pytest.approx(40.0 / 98.5)
    assert [p for p, f in flags.items() if f is not None] == [(2, 0)]  # SYS pairs are slow by class, not flagged
