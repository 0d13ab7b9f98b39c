"""Bench timing modes (pure): what each one times, and which backends can run it.

``host`` is nccl-tests' default methodology: a host clock around ``iters``
back-to-back launches and one stream sync, so per-launch host cost is in the
number exactly as in nccl-tests. ``graph`` is nccl-tests ``-G 1``: the
iteration loop captured once into a CUDA graph, the graph launched and timed
with the same host clock. The other modes hide part of the cost and say so in
their name; every stored metric carries the mode that produced it.
"""

from __future__ import annotations

from envmatrix.errors import ConfigError

DEFAULT_TIMING = "host"

TIMINGS = {
    "host": "host clock around back-to-back launches + stream sync, like nccl-tests (default); on NCCL the launches "
            "go straight into the libnccl torch loaded, on torch's communicator",
    "host-torch": "as host, but launched through torch.distributed's call path (adds torch's per-call host cost)",
    "graph": "the iteration loop captured into a CUDA graph, launched once and host-timed, like nccl-tests -G 1",
    "device-hides-launch": "CUDA events with a GPU sleep queued first: hides host launch cost (old default)",
    "blocking": "call by call, each call completed before the next",
}

_CUDA_ONLY = ("graph", "device-hides-launch")


def check_timing(timing: str, backend: str, key: str) -> str:
    """``key``: the name the value was given under (``probe.bench.timing``, ``--timing``)."""
    if not isinstance(timing, str) or timing not in TIMINGS:  # a list was unhashable: a TypeError traceback
        raise ConfigError(f"{key}: {timing!r} not allowed; allowed: {', '.join(TIMINGS)}")
    if timing in _CUDA_ONLY and backend != "nccl":
        raise ConfigError(f"{key}: {timing!r} needs CUDA (backend nccl), backend is {backend!r}; allowed here: host, blocking")
    return timing
