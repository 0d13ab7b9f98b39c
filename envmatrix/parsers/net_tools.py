"""``iperf3 -J`` and ``ping -q`` output -> figures (pure): the host pair test's TCP throughput and ICMP round trip."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Optional

_RTT = re.compile(r"(?:rtt|round-trip) min/avg/max/(?:mdev|stddev) = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")
_LOSS = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")


@dataclass(frozen=True)
class Iperf3Result:
    bytes: Optional[int]
    seconds: Optional[float]
    bits_per_second: Optional[float]  # as the receiver counted them (sum_received)
    error: Optional[str]
    version: Optional[str]

    @property
    def gbytes_per_second(self) -> Optional[float]:
        return None if self.bits_per_second is None else self.bits_per_second / 8e9


def parse_iperf3_json(text: str) -> Iperf3Result:
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        first = (text or "").strip().splitlines()[:1]
        return Iperf3Result(None, None, None, f"iperf3 printed no JSON: {first[0] if first else '(nothing)'}", None)
    version = (data.get("start") or {}).get("version")
    if data.get("error"):
        return Iperf3Result(None, None, None, str(data["error"]), version)
    got = (data.get("end") or {}).get("sum_received") or {}
    if "bits_per_second" not in got:
        return Iperf3Result(None, None, None, "iperf3 JSON has no end.sum_received", version)
    return Iperf3Result(int(got.get("bytes", 0)), float(got.get("seconds", 0.0)), float(got["bits_per_second"]), None,
                        version)


@dataclass(frozen=True)
class PingResult:
    sent: int
    received: int
    rtt_avg_ms: Optional[float]
    rtt_min_ms: Optional[float]


def parse_ping(text: str) -> Optional[PingResult]:
    """The summary of ``ping -c N -q HOST`` (iputils or busybox); None when there is none."""
    loss = _LOSS.search(text or "")
    if loss is None:
        return None
    rtt = _RTT.search(text)
    return PingResult(int(loss.group(1)), int(loss.group(2)), float(rtt.group(2)) if rtt else None,
                      float(rtt.group(1)) if rtt else None)
