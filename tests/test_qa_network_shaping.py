"""The htb tree envmatrix installs, read back from the kernel and measured on a real TCP transfer between two
namespaces (held-out QA of the network features: rates from the lowest allowed to 1 tbit)."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from pyroute2.netlink.rtnl.tcmsg import common as tc_common

from envmatrix import cluster as emulated
from envmatrix.boundary import ProcessSpec
from envmatrix.errors import ConfigError
from envmatrix.execution import processes
from envmatrix.network import shaping, state
from envmatrix.network.conditions import parse_condition

REASON = emulated.unavailable_reason()
needs_namespaces = pytest.mark.skipif(REASON is not None, reason=REASON or "")


@pytest.fixture
def pair(tmp_path, monkeypatch):
    monkeypatch.setenv(state.STATE_ENV, str(tmp_path / "state"))
    made = emulated.up(2)
    yield made
    made.close()


def burst_seconds(proof) -> float:
    """The htb class's burst as the kernel holds it (scheduler ticks), in seconds of its rate."""
    line = next(line for line in proof.links[0].before.splitlines() if line.startswith("class htb"))
    match = re.search(r" buffer (\d+)", line)
    return 0.0 if match is None else int(match.group(1)) / tc_common.tick_in_usec * 1e-6


def test_rates_under_64_bit_are_refused_naming_the_range():
    with pytest.raises(ConfigError, match=r"'63bit': out of range; allowed: 64bit to 1tbit"):
        parse_condition("slow", "rate=63bit", "--network 'slow:rate=63bit'")


@needs_namespaces
def test_every_allowed_rate_installs_with_a_burst_of_a_millisecond_or_more(pair):
    # the burst was one MTU truncated to whole microseconds: 625 bytes at 5 Gbit, none at 40 Gbit and 1 tbit (a
    # sender woken late never caught up: 1.17 x S/R at 5 Gbit, 1.30 x at 10 Gbit); rate=8bit (then allowed)
    # raised struct.error from pyroute2's rate table, a traceback with exit 1
    for rate in ("64bit", "1kbit", "100mbit", "5gbit", "40gbit", "1tbit"):
        condition = parse_condition("c", f"rate={rate}", "test")
        with shaping.shaped([pair.host_link("node0")], condition) as proof:
            assert burst_seconds(proof) >= 0.001, (rate, proof.links[0].before)


RECEIVER = """
import json, socket, sys, time
size = int(sys.argv[1])
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); srv.bind(("0.0.0.0", 5202)); srv.listen(1)
conn, _ = srv.accept()
got, first, buf = 0, None, bytearray(1 << 20)
while got < size:
    n = conn.recv_into(buf)
    if not n:
        break
    first = first or time.monotonic()
    got += n
print(json.dumps({"bytes": got, "seconds": time.monotonic() - first}))
"""
SENDER = """
import socket, sys, time
host, size = sys.argv[1], int(sys.argv[2])
for _ in range(100):
    try:
        s = socket.create_connection((host, 5202), 1); break
    except OSError:
        time.sleep(0.05)
s.settimeout(None)
chunk = bytes(1 << 20)
for _ in range(size >> 20):
    s.sendall(chunk)
s.close()
"""


def transfer_s(cluster, size: int, tmp_path) -> float:
    env = dict(os.environ)
    specs = [ProcessSpec(tuple(cluster.argv_in("node1", [sys.executable, "-c", RECEIVER, str(size)])), env,
                         str(tmp_path / "receiver.log"), "receiver"),
             ProcessSpec(tuple(cluster.argv_in("node0", [sys.executable, "-c", SENDER, cluster.addresses["node1"],
                                                         str(size)])), env, str(tmp_path / "sender.log"), "sender")]
    outcomes = processes.run_group(specs, timeout_s=60)
    log = (tmp_path / "receiver.log").read_text()
    assert [o.exit_code for o in outcomes] == [0, 0], log + (tmp_path / "sender.log").read_text()
    report = json.loads(log.strip().splitlines()[-1])
    assert report["bytes"] == size
    return report["seconds"]


@needs_namespaces
@pytest.mark.slow
def test_a_5_gbit_condition_moves_data_at_5_gbit_not_a_sixth_less(pair, tmp_path):
    size = 128 << 20  # 214.7 ms at 5 Gbit
    condition = parse_condition("b5g", "rate=5gbit", "test")
    floor = condition.min_transfer_s(size)
    unshaped = transfer_s(pair, size, tmp_path)
    if unshaped > floor / 2:
        pytest.skip(f"this box moves {size} B in {unshaped:.3f} s unshaped: too busy to tell 5 Gbit apart")
    # measured with the one-MTU burst: 1.17-1.19 x S/R on every try; with a millisecond of burst 1.04 x (TCP/IP
    # headers), but a sender woken late on a loaded 2-core CI box also gave 1.18 x once (CI run 85): the best of up
    # to five tries tells the two apart, a one-MTU burst never gets under 1.12 x
    tries = []
    with shaping.shaped([pair.host_link("node0")], condition):
        while len(tries) < 5 and (not tries or min(tries) > 1.12 * floor):
            tries.append(transfer_s(pair, size, tmp_path))
    shaped = min(tries)
    assert 0.97 * floor <= shaped <= 1.12 * floor, f"{[round(t, 3) for t in tries]} s vs S/R {floor:.3f} s"
