"""One rank of a host pair round's network tools: ``python -m envmatrix.execution.netpair`` (started by a launcher).

The host pair test (``envmatrix bench --pairs hosts``) asks each round's hosts for seed 000's tool figures beside
the rank-level p2p ones: ping's round trip and iperf3's TCP throughput. Each rank finds its pair in the round the
driver planned (``ENVMATRIX_PROBE``: pairs of ranks, the address of each rank's host); the pair's first rank is
the receiver, as in seed 000 (NCCL recv / iperf3 server): it serves two one-off iperf3 tests; the second rank
pings it, then runs the iperf3 client twice, sending (first -> receiver) and with ``-R`` receiving. A tool that is
not on PATH is reported as "not installed", never as a figure. Its processes start here, in execution/.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
from typing import Any, Optional

from envmatrix.boundary import LAUNCHER_RANK_VARS, RESULT_DIR_VAR, rank_report_path, read_launcher_identity
from envmatrix.execution.processes import run_capture
from envmatrix.parsers.net_tools import parse_iperf3_json, parse_ping

NOT_INSTALLED = "not installed"
CONNECT_WAIT_S = 20.0  # how long a client retries while its server is not listening yet


def tool_version(tool: str) -> str:
    if shutil.which(tool) is None:
        return NOT_INSTALLED
    done = run_capture([tool, "--version"] if tool == "iperf3" else [tool, "-V"], timeout_s=5)
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else tool


def serve(port: int, tests: int, seconds: int) -> list[str]:
    """One-off iperf3 servers until ``tests`` tests completed (a test the client saw fail, it runs again) or the
    time a client could still come is over; errors only when a test never completed."""
    errors: list[str] = []
    served = 0
    deadline = time.monotonic() + tests * (CONNECT_WAIT_S + 4 * seconds + 10)
    while served < tests and time.monotonic() < deadline:
        done = run_capture(["iperf3", "-s", "-1", "-p", str(port), "-J"], timeout_s=max(1.0, deadline - time.monotonic()))
        error = parse_iperf3_json(done.stdout).error if done.returncode == 0 else (
            parse_iperf3_json(done.stdout).error or done.stderr.strip()[:200] or f"exit {done.returncode}")
        if error is None:
            served += 1
        else:
            errors.append(f"iperf3 server: {error}")
    return [] if served == tests else errors


def client(address: str, port: int, seconds: int, reverse: bool) -> tuple[Optional[Any], Optional[str]]:
    """Retries until ``CONNECT_WAIT_S`` passed: the server may not listen yet, still close the previous test, or
    have dropped a test on a busy host (it serves again until it saw every test complete)."""
    argv = ["iperf3", "-c", address, "-p", str(port), "-t", str(seconds), "-J"] + (["-R"] if reverse else [])
    deadline = time.monotonic() + CONNECT_WAIT_S
    while True:
        done = run_capture(argv, timeout_s=CONNECT_WAIT_S + 4 * seconds + 10)
        got = parse_iperf3_json(done.stdout)
        if got.error is None:
            return got, None
        if time.monotonic() > deadline:
            return None, got.error
        time.sleep(0.2)


def run_pair(spec: dict[str, Any], rank: int, pair: list[int], index: int) -> tuple[list[dict[str, Any]], list[str]]:
    receiver, sender = pair
    port = int(spec.get("port", 5201)) + index
    seconds = int(spec.get("iperf_seconds", 1))
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    have_iperf = shutil.which("iperf3") is not None
    if rank == receiver:
        return rows, serve(port, 2, seconds) if have_iperf else []
    address = spec["addresses"][receiver]
    if shutil.which("ping") is not None:
        done = run_capture(["ping", "-c", str(int(spec.get("ping_count", 3))), "-q", address], timeout_s=30)
        got = parse_ping(done.stdout)
        if got is not None and got.rtt_avg_ms is not None:
            rows.append({"collective": "ping", "pair": [receiver, sender], "size_bytes": 64, "count": got.received,
                         "time_us": got.rtt_avg_ms * 1e3, "algbw_gbps": None, "busbw_gbps": None, "wrong": None,
                         "source": "ping"})
        else:
            errors.append(f"ping {address}: {(done.stdout + done.stderr).strip().splitlines()[-1:] or 'no summary'}")
    if have_iperf:
        for reverse, recv, send in ((False, receiver, sender), (True, sender, receiver)):
            got, error = client(address, port, seconds, reverse)
            if got is None:
                errors.append(f"iperf3 {send}->{recv}: {error}")
                continue
            rows.append({"collective": "iperf3", "pair": [recv, send], "size_bytes": got.bytes,
                         "time_us": got.seconds * 1e6, "algbw_gbps": got.gbytes_per_second, "busbw_gbps": None,
                         "wrong": None, "source": "iperf3"})
    return rows, errors


def main() -> int:
    spec = json.loads(os.environ.get("ENVMATRIX_PROBE", "{}"))
    ident = read_launcher_identity(os.environ, LAUNCHER_RANK_VARS)
    if ident is None:
        print("envmatrix netpair: no rank variables set", file=sys.stderr)
        return 2
    rank = ident.rank
    report: dict[str, Any] = {"rank": rank, "pid": os.getpid(), "phase": "net", "hostname": socket.gethostname(),
                              "versions": {"iperf3": tool_version("iperf3"), "ping": tool_version("ping")}}
    path = rank_report_path(os.environ.get(RESULT_DIR_VAR, "."), rank)
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    for index, pair in enumerate(spec.get("pairs") or []):
        if rank in pair:
            rows, errors = run_pair(spec, rank, [int(p) for p in pair], index)
    report.update(bench=rows, net_errors=errors, phase="done", outcome="pass")
    with open(f"{path}.tmp", "w") as fh:
        json.dump(report, fh)
    os.replace(f"{path}.tmp", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
