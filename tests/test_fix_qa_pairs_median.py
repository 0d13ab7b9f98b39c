"""bench --pairs hosts: the table's time and GB/s are the figures the judgement reads (the median iteration).

The host table showed each pair's mean time while the judgement (slow pair, slow host, exclude:) read the median
iteration, so one stalled iteration made a row look slowest while another pair was the one marked `slow pair`
(3x1 on gloo: node1<-node0 read 0.044 GB/s unmarked, node1-node2 at 0.158 marked slow)."""

from envmatrix.bench.aggregate import aggregate_rows
from envmatrix.judgement.pairs import PairFigure, judge_pairs
from envmatrix.reporting.pairs_tables import host_pair_rows, typical_gbps

BIG, SMALL = 1 << 20, 8


def _uni(pair, times, round_):
    mean, median = sum(times) / len(times), sorted(times)[len(times) // 2]
    return {"collective": "pair_uni", "pair": list(pair), "size_bytes": BIG, "time_us": mean, "time_min_us": min(times),
            "time_median_us": median, "time_max_us": max(times), "wrong": 0, "rank": pair[1], "round": round_,
            "iters": len(times)}


def test_host_table_shows_the_median_iteration_the_judgement_reads():
    # pair (0, 1): one stalled iteration, typical 1000 us; pair (1, 2): steady 1500 us -- the slow one every time
    rows = [_uni((0, 1), [1000.0, 1000.0, 60000.0], 0), _uni((1, 0), [1000.0] * 3, 0),
            _uni((1, 2), [1500.0] * 3, 1), _uni((2, 1), [1500.0] * 3, 1),
            _uni((0, 2), [1000.0] * 3, 2), _uni((2, 0), [1000.0] * 3, 2)]
    metrics = aggregate_rows(rows, 3)
    table = host_pair_rows(metrics, [], ["node0", "node1", "node2"], BIG, SMALL, {}, {})
    stalled = next(r for r in table if (r.recv, r.send) == ("node1", "node0"))
    assert stalled.time_ms == 1.0  # the median iteration, not the mean (20.67 ms)
    uni = {tuple(m["pair"]): m for m in metrics}
    figures = [PairFigure(n, f"node{a}", f"node{b}", min(typical_gbps(uni[(a, b)]), typical_gbps(uni[(b, a)])))
               for n, (a, b) in enumerate(((0, 1), (1, 2), (0, 2)))]
    judged_slow = {(v.figure.a, v.figure.b) for v in judge_pairs(figures, 0.25).pairs if v.slow}
    lowest = min(table, key=lambda r: r.gbps)
    assert {lowest.recv, lowest.send} == {"node1", "node2"} and ("node1", "node2") in judged_slow
