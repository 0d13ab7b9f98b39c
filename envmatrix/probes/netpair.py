"""The host pair round's network tools as a probe: ping and iperf3 between each pair's hosts (seed 000's columns).

Its ranks run ``envmatrix.execution.netpair`` (one per host, one round of disjoint pairs per run); their rows are
tool figures (ping round trip, iperf3 throughput as the receiver counted it), kept per ordered pair as measured:
nothing to average over ranks. Each rank's tool versions say "not installed" where a tool is missing.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from envmatrix import values
from envmatrix.boundary import ProcessOutcome
from envmatrix.errors import ConfigError
from envmatrix.planning.plan import ProbeSpec
from envmatrix.probes.base import ModuleProbe, from_process, register
from envmatrix.results import PASS, RankResult


@register
class NetPairProbe(ModuleProbe):
    name = "netpair"
    rank_module = "envmatrix.execution.netpair"
    defaults = {
        "pairs": [],  # this round's disjoint pairs of ranks: [receiver, sender]
        "addresses": [],  # the host (name or address) of each rank, by rank
        "iperf_seconds": 1,  # iperf3 -t (whole seconds)
        "ping_count": 3,
        "port": 5201,  # the first iperf3 port; the round's pair i uses port + i
        "timeout_s": 120.0,
        "grace_s": 5.0,
    }

    def normalize(self, params: dict[str, Any], where: str, backend: str) -> dict[str, Any]:
        pairs = params.get("pairs")
        if not isinstance(pairs, list) or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
            raise ConfigError(f"{where}.pairs: {pairs!r} not allowed; allowed: a list of [receiver, sender] rank pairs")
        params["pairs"] = [[values.integer(f"{where}.pairs[{i}]", rank, 0) for rank in pair] for i, pair in enumerate(pairs)]
        if not isinstance(params.get("addresses"), list):
            raise ConfigError(f"{where}.addresses: {params.get('addresses')!r} not allowed; allowed: a host per rank")
        for i, address in enumerate(params["addresses"]):  # ping and iperf3 take them as arguments
            values.host(f"{where}.addresses[{i}]", address)
        params["ping_count"] = values.integer(f"{where}.ping_count", params.get("ping_count"), 1)
        # the round's pair i listens on port + i
        params["port"] = values.integer(f"{where}.port", params.get("port"), 1, 65535 - max(len(pairs) - 1, 0))
        seconds = params.get("iperf_seconds")
        # iperf3 reads -t as whole seconds: -t 0.3 would be 0, which means forever
        if isinstance(seconds, float) and seconds.is_integer():
            seconds = params["iperf_seconds"] = int(seconds)
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 1:
            raise ConfigError(f"{where}.iperf_seconds: {seconds!r} not allowed; allowed: a whole number of seconds >= 1")
        return super().normalize(params, where, backend)

    def check_grids(self, spec: ProbeSpec, grids: Sequence[Any], where: str) -> None:
        largest = max((grid.nodes * grid.ppn for grid in grids), default=0)
        for i, pair in enumerate(spec.params["pairs"]):
            if grids and max(pair) >= largest:  # the pair's missing rank failed the run as a network error
                raise ConfigError(f"{where}.pairs[{i}]: {pair} names rank {max(pair)}, on no grid "
                                  f"({', '.join(map(str, grids))}: ranks 0..{largest - 1}); allowed: ranks below {largest}")

    def interpret(self, rank: RankResult, process: ProcessOutcome, report: Optional[dict[str, Any]], log: str) -> RankResult:
        from_process(rank, process, log)
        if report:
            rank.phase = report.get("phase")
            rank.hostname = report.get("hostname") or rank.hostname
            rank.versions = dict(report.get("versions") or {})
            rank.bench = list(report.get("bench") or [])
            rank.checks = [{"collective": "net", "numel": 0, "wrong": 0, "error": e} for e in report.get("net_errors") or []]
            if report.get("outcome") and rank.outcome == PASS:
                rank.outcome = report["outcome"]
        return rank

    def metrics(self, ranks: Sequence[RankResult], world: int) -> list[dict[str, Any]]:
        return [row for r in sorted(ranks, key=lambda r: r.rank) for row in r.bench]
