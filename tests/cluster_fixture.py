"""The namespace cluster for tests: envmatrix.cluster's emulated hosts (the library ``envmatrix cluster up``
uses), owned by the test process, checked clean when the test ends.

Each emulated host is a network namespace on a private bridge with its own /etc/hosts and hostname, reached by
a real mpirun through a ``plm_rsh_agent`` script; faults (link_down, cut_pair, rate_limit, hang) are real
kernel state. See envmatrix/cluster/emulated.py. Needs root, network namespaces and mpirun; otherwise the
fixture skips, saying why. Clusters whose owning test process died are removed by the next one.
"""

from __future__ import annotations

import shutil
from typing import Iterator, Optional

import pytest

from envmatrix import cluster as emulated
from envmatrix.cluster import EmulatedCluster

NamespaceCluster = EmulatedCluster


def unavailable_reason() -> Optional[str]:
    """Why a namespace cluster cannot run here, or None."""
    reason = emulated.unavailable_reason()
    if reason:
        return reason
    if shutil.which("mpirun") is None:
        return "namespace cluster needs 'mpirun' on PATH (openmpi-bin)"
    return None


@pytest.fixture
def ns_cluster() -> Iterator:
    """Factory: ``ns_cluster(4)`` -> an EmulatedCluster, closed (and checked clean) after the test."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    made: list[EmulatedCluster] = []

    def make(hosts: int) -> EmulatedCluster:
        cluster = emulated.up(hosts)
        made.append(cluster)
        return cluster

    yield make
    errors = []
    for cluster in made:
        try:
            cluster.close()
        except AssertionError as exc:
            errors.append(str(exc))
    assert not errors, "; ".join(errors)
