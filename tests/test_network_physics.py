"""The physics check (judgement/physics.py) and the seed-shaped tables built from stored rows (pure)."""

from __future__ import annotations

import csv
import io

import pytest

from envmatrix.judgement import physics
from envmatrix.reporting.conditions_tables import conditions_csv, conditions_markdown, pattern_blocks
from envmatrix.results import ProbeResult

MIB = 1 << 20


def test_seed_000_bound_is_s_over_r():
    # seed 000: "bandwidth 1Gbps: 64 MB in 541 ms"; 64 MiB * 8 / 1e9 = 536.9 ms
    assert physics.floor_s("p2p", 64 * MIB, 2, 10**9) == pytest.approx(0.5369, abs=1e-4)
    assert physics.check(0.541, physics.floor_s("p2p", 64 * MIB, 2, 10**9)).verdict == physics.OK


def test_pattern_factors():
    assert physics.bytes_factor("allreduce", 4) == pytest.approx(1.5)  # the busbw table's 2(n-1)/n
    assert physics.bytes_factor("ps_central", 8) == 2.0
    assert physics.bytes_factor("ps_sharded", 4) == pytest.approx(1.5)
    assert physics.bytes_factor("p2p", 1) is None  # one rank: nothing crosses a link
    assert physics.hosts_crossing("4x1") == 4 and physics.hosts_crossing("1x2") == 2


def test_under_the_bound_is_flagged_not_in_effect():
    bound = physics.floor_s("p2p", 64 * MIB, 2, 10**9)
    low = physics.check(0.84 * bound, bound)
    assert low.verdict == physics.NOT_IN_EFFECT and low.flagged
    assert "shaping not in effect" in low.line and "under the floor" in low.line
    edge = physics.check(0.86 * bound, bound)
    assert edge.verdict == physics.OK


def test_under_the_floor_with_the_payload_through_the_shaper_is_not_a_bypass():
    # measured on namespace hosts: p2p 4 MiB at 200 Mbit 140.8 ms vs S/R 167.8 ms, 26 MB through the qdiscs
    bound = physics.floor_s("p2p", 4 * MIB, 2, 2 * 10**8)
    small = physics.check(0.1408, bound, crossed=True)
    assert small.verdict == physics.UNDER_FLOOR and small.flagged and "socket buffers" in small.line
    assert physics.check(0.1408, bound, crossed=False).verdict == physics.NOT_IN_EFFECT
    assert physics.check(0.1408, bound).verdict == physics.NOT_IN_EFFECT  # not counted: the strict reading
    row = _row("p2p", 4 * MIB, 0.1408)
    assert physics.check_cell("p2p", 4 * MIB, "2x1", 2 * 10**8, row, sent_bytes=26_385_412).verdict == physics.UNDER_FLOOR
    assert physics.check_cell("p2p", 4 * MIB, "1x2", 2 * 10**8, row, sent_bytes=2929).verdict == physics.NOT_IN_EFFECT


def test_box_limited_when_shaped_equals_unshaped_and_the_floor_exceeds_noise():
    # the 16 emulated hosts: default 3.06 s, 5 Gbit 2.98 s, floor 2*15/16*256MiB*8/5e9 = 0.805 s
    bound = physics.floor_s("allreduce", 256 * MIB, 16, 5 * 10**9)
    assert bound == pytest.approx(0.805, abs=1e-3)
    verdict = physics.check(2.98, bound, baseline_s=3.06)
    assert verdict.verdict == physics.BOX_LIMITED
    assert verdict.line.startswith(physics.BOX_LIMITED_LINE)
    # a condition too mild to show on this box: its floor is under the unshaped time, so the box set the time
    assert physics.check(3.0, 0.1, baseline_s=3.06).verdict == physics.BOX_LIMITED
    # a shaped run clearly slower than the unshaped one is the condition's figure
    assert physics.check(1.1, 1.0, baseline_s=0.2).verdict == physics.OK


def test_no_rate_no_bound():
    assert physics.check(0.1, None).verdict == physics.NO_BOUND


def _row(pattern, size, median_s, spread=0.02):
    us = median_s * 1e6
    return {"collective": pattern, "size_bytes": size, "dtype": "float32", "in_place": False, "time_us": us,
            "time_median_us": us, "time_min_us": us * (1 - spread), "time_max_us": us * (1 + spread)}


def _result(name, value, rate, grid, backend, rows, sent=1000):
    network = {"name": name, "value": value, "condition": {"name": name, "rate_bps": rate},
               "sent_bytes": {"node0": sent} if rate else {}}
    return ProbeResult(run_key=f"{name}{grid}{backend}", setup={"name": "base"}, grid=grid, probe={}, backend=backend,
                       launcher="mpirun", outcome="pass", metrics=rows, network=network)


def seed_000_results():
    out = []
    for backend in ("gloo", "nccl"):
        out.append(_result("default", "unshaped", None, "2x1", backend,
                           [_row("p2p", 64 * MIB, 0.107), _row("p2p", 128 * MIB, 0.216)]))
        out.append(_result("b1g", "rate=1gbit", 10**9, "2x1", backend,
                           [_row("p2p", 64 * MIB, 0.541), _row("p2p", 128 * MIB, 1.082)]))
        # both ranks took loopback: far under the floor
        out.append(_result("b200m", "rate=200mbit", 2 * 10**8, "2x1", backend,
                           [_row("p2p", 64 * MIB, 0.110), _row("p2p", 128 * MIB, 5.4)], sent=0))
    return out


def test_seed_000_table_layout_and_flags():
    blocks = pattern_blocks(seed_000_results())
    assert [b.pattern for b in blocks] == ["p2p"]
    block = blocks[0]
    assert block.labels == ["64M gloo", "64M nccl", "128M gloo", "128M nccl"]  # seed 000's column order
    assert [name for name, _ in block.conditions] == ["default", "b1g", "b200m"]
    text = conditions_markdown(seed_000_results())
    assert "| b1g | rate=1gbit | 541.0 ms (S/R 536.9) |" in text
    assert "110.0 ms (S/R 2.68 s) **shaping not in effect**" in text
    assert "0 bytes went through the shaped qdiscs" in text
    rows = list(csv.DictReader(io.StringIO(conditions_csv(seed_000_results()))))
    assert len(rows) == 12
    flagged = [r for r in rows if r["verdict"] == physics.NOT_IN_EFFECT]
    assert {(r["condition"], r["size_bytes"]) for r in flagged} == {("b200m", str(64 * MIB))}
    one = next(r for r in rows if r["condition"] == "b1g" and r["backend"] == "gloo" and r["size_bytes"] == str(64 * MIB))
    assert float(one["min_s"]) < float(one["median_s"]) < float(one["max_s"])
    assert float(one["floor_s"]) == pytest.approx(0.536871, abs=1e-6)


def test_seed_001_blocks_columns_size_by_nodes():
    results = []
    for grid, base in (("4x1", 0.37), ("8x1", 0.45)):
        for pattern in ("allreduce", "ps_central", "ps_sharded"):
            results.append(_result("default", "unshaped", None, grid, "gloo", [_row(pattern, 256 * MIB, base)]))
            results.append(_result("b5g", "rate=5gbit", 5 * 10**9, grid, "gloo", [_row(pattern, 256 * MIB, base * 2.2)]))
    blocks = pattern_blocks([r for r in results])
    assert [b.pattern for b in blocks] == ["allreduce", "ps_central", "ps_sharded"]
    assert blocks[0].labels == ["4 nodes", "8 nodes"]
    # ps_central's floor 2S/R = 0.859 s: 0.814 s measured is under it by 5%: within tolerance
    cell = blocks[1].cell("b5g", blocks[1].columns[0])
    assert cell.check.bound_s == pytest.approx(0.859, abs=1e-3) and cell.check.verdict == physics.OK


def test_sizes_rounded_to_the_rank_count_share_the_requested_sizes_column():
    # ps_sharded's buffer is a whole number of elements per rank: 4M over 3 ranks ran as 4194300 bytes, 16M as
    # 16777212 (3 ranks) and 16777200 (5); the block read '4194300B 3 nodes | ... | 16777200B 5 nodes | 16777212B
    # 3 nodes' beside allreduce's '4M 3 nodes | 4M 5 nodes | 16M 3 nodes | 16M 5 nodes' (held-out audit, 3/5 hosts)
    sizes = {"3x1": (4194300, 16777212), "5x1": (4194300, 16777200)}
    results = []
    for grid, (small, large) in sizes.items():
        results.append(_result("default", "unshaped", None, grid, "gloo",
                               [_row("allreduce", 4 * MIB, 0.01), _row("allreduce", 16 * MIB, 0.04),
                                _row("ps_sharded", small, 0.02), _row("ps_sharded", large, 0.08)]))
    blocks = pattern_blocks(results)
    assert [b.labels for b in blocks] == [["4M 3 nodes", "4M 5 nodes", "16M 3 nodes", "16M 5 nodes"]] * 2
    sharded = blocks[1]
    assert [sharded.cell("default", col).size_bytes for col in sharded.columns] == [4194300, 4194300, 16777212, 16777200]
    rows = list(csv.DictReader(io.StringIO(conditions_csv(results))))
    assert {r["size_bytes"] for r in rows if r["pattern"] == "ps_sharded"} == {"4194300", "16777212", "16777200"}


@pytest.mark.slow  # matplotlib's import and an SVG per pattern: seconds on 2 busy cores
def test_html_report_has_the_conditions_section_with_a_plot_per_pattern(tmp_path):
    from envmatrix.reporting.html import render_html
    from envmatrix.reporting.html_model import RunData

    html = render_html(RunData(str(tmp_path), seed_000_results()))
    assert 'id="network-conditions"' in html and 'data-pattern="p2p"' in html
    assert 'data-plot="conditions-p2p"' in html and "<svg" in html
    assert "shaping not in effect" in html and "rate=200mbit" in html
    assert "base @ b1g" in html  # the matrix column of each (setup, condition)
    plain = [r for r in seed_000_results() if not r.network.get("condition", {}).get("rate_bps")]
    for r in plain:
        r.network = {}
    assert 'id="network-conditions"' not in render_html(RunData(str(tmp_path), plain))  # no axis, no section


def test_shaping_missed_names_every_bounded_pattern_and_turns_only_a_pass_inconclusive():
    from envmatrix.app.network_axis import shaping_missed, with_shaping_missed
    from envmatrix.errors import EXIT_FAILURES, EXIT_INCONCLUSIVE, EXIT_OK

    loop = _result("b200m", "rate=200mbit", 2 * 10**8, "2x1", "gloo",
                   [_row("allgather", 64 * MIB, 0.010), _row("broadcast", 64 * MIB, 0.010), _row("p2p", 64 * MIB, 2.8)],
                   sent=2929)
    missed = shaping_missed(seed_000_results() + [loop])
    assert sorted(missed) == sorted(["allgather 64M on 2x1 under b200m (rate=200mbit)",
                                     "broadcast 64M on 2x1 under b200m (rate=200mbit)",
                                     "p2p 64M on 2x1 under b200m (rate=200mbit)"]), missed
    assert [with_shaping_missed(code, missed) for code in (EXIT_OK, EXIT_FAILURES)] == [EXIT_INCONCLUSIVE, EXIT_FAILURES]
    assert with_shaping_missed(EXIT_OK, []) == EXIT_OK
