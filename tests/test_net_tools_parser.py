"""iperf3 -J and ping -q parsers on recorded output (tests/data/net_tools: a real loopback iperf3 run here)."""

from pathlib import Path

from envmatrix.parsers.net_tools import parse_iperf3_json, parse_ping

DATA = Path(__file__).parent / "data" / "net_tools"


def test_iperf3_client_json():
    got = parse_iperf3_json((DATA / "iperf3_client_loopback.json").read_text())
    assert got.error is None and got.version == "iperf 3.12"
    assert got.bytes == 1705246720 and abs(got.seconds - 1.001192) < 1e-9
    assert abs(got.gbytes_per_second - 13625731887.589993 / 8e9) < 1e-9


def test_iperf3_refused_and_garbage():
    refused = parse_iperf3_json((DATA / "iperf3_refused.json").read_text())
    assert refused.bits_per_second is None and "Connection refused" in refused.error
    assert parse_iperf3_json("iperf3: error - unable to connect").error.startswith("iperf3 printed no JSON")


def test_ping_summary_and_total_loss():
    ok = parse_ping((DATA / "ping_q.txt").read_text())
    assert (ok.sent, ok.received, ok.rtt_avg_ms, ok.rtt_min_ms) == (3, 3, 0.052, 0.041)
    lost = parse_ping((DATA / "ping_q_lost.txt").read_text())
    assert lost.received == 0 and lost.rtt_avg_ms is None
    assert parse_ping("ping: unknown host") is None
