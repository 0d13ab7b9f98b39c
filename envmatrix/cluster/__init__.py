"""Emulated hosts on one machine: network namespaces on a bridge, reached by mpirun through a small agent.

``envmatrix cluster up N`` and the tests build them with the same code (``emulated.up``); shaping their links
goes through envmatrix.network (the one room that touches qdiscs), and processes in them start through
envmatrix.execution.
"""

from envmatrix.cluster.emulated import EmulatedCluster, attach, clusters, down, unavailable_reason, up

__all__ = ["EmulatedCluster", "attach", "clusters", "down", "unavailable_reason", "up"]
