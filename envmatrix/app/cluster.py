"""``envmatrix cluster up|down|list``: emulated hosts (network namespaces on a bridge) a user without a cluster
runs multi-host grids on, reached by mpirun through the cluster's agent."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from envmatrix.errors import ConfigError


@dataclass(frozen=True)
class ClusterUpRequest:
    hosts: int
    name: Optional[str] = None
    slots: int = 1  # per host, in the hostfile written beside the agent


@dataclass(frozen=True)
class ClusterDownRequest:
    name: Optional[str] = None
    everything: bool = False


@dataclass(frozen=True)
class ClusterView:
    name: str
    hosts: list[str]
    addresses: dict[str, str]
    namespaces: dict[str, str]
    links: dict[str, str]  # host -> its interface inside its namespace (where its egress is shaped)
    bridge: str
    agent: str
    hostfile: str
    conf_snippet: str
    persistent: bool
    owner_alive: bool


def _view(cluster) -> ClusterView:
    hostfile = cluster.dir / "hostfile"
    return ClusterView(cluster.name, list(cluster.hosts), dict(cluster.addresses),
                       {h: cluster.ns(h) for h in cluster.hosts}, {h: cluster.host_link(h).ifname for h in cluster.hosts},
                       cluster.bridge, str(cluster.agent), str(hostfile), cluster.conf_snippet(),
                       cluster.record.persistent, cluster.record.owner_alive())


def up(request: ClusterUpRequest) -> ClusterView:
    from envmatrix import cluster as emulated

    if not isinstance(request.slots, int) or not 1 <= request.slots <= 1024:
        raise ConfigError(f"cluster up: --slots {request.slots!r} not allowed; allowed: 1..1024")
    made = emulated.up(request.hosts, request.name, persistent=True)
    made.hostfile(Path(made.dir) / "hostfile", request.slots)
    return _view(made)


def down(request: ClusterDownRequest) -> list[tuple[str, list[str]]]:
    from envmatrix import cluster as emulated

    return emulated.down(request.name, request.everything)


def listing() -> list[ClusterView]:
    from envmatrix import cluster as emulated

    return [_view(c) for c in emulated.clusters()]
