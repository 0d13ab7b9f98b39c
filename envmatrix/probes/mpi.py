"""The ``mpi`` probe: the MPI layer on its own, no torch and no NCCL.

Each rank checks that MPI_COMM_WORLD agrees with what the launcher told it (size and rank;
ranks started as MPI singletons each see a world of 1), allreduces a value-checked buffer
through mpi4py, and gathers hostnames (on real nodes: one host per node, ppn ranks each).
Run it under the same launcher as an NCCL sweep: if it fails too, the launch or MPI is
broken; if it passes, look at NCCL. mpi4py is an optional extra (``pip install
'envmatrix[mpi]'``); a rank without it reports ``unresolved`` with that one line.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Optional

from envmatrix.boundary import MPI4PY_MISSING
from envmatrix.errors import ConfigError
from envmatrix.planning.plan import ProbeSpec
from envmatrix.probes.base import ModuleProbe, register
from envmatrix.probes.builtin import BuiltinProbe

@register
class MpiProbe(ModuleProbe):
    name = "mpi"
    rank_module = "envmatrix.rank.mpi_main"
    defaults = {"numel": 1024, "timeout_s": 60.0, "grace_s": 5.0}

    def normalize(self, params: dict[str, Any], where: str, backend: str) -> dict[str, Any]:
        if not isinstance(params["numel"], int) or isinstance(params["numel"], bool) or params["numel"] < 1:
            raise ConfigError(f"{where}.numel: {params['numel']!r} not allowed; allowed: an integer >= 1")
        return super().normalize(params, where, backend)

    def missing_here(self, spec: ProbeSpec, python: str) -> Optional[str]:
        # The ranks run this interpreter: without mpi4py every one would end unresolved (exit 125).
        try:
            found = importlib.util.find_spec("mpi4py") is not None
        except (ImportError, ValueError):
            found = False
        if found:
            return None
        return f"probe mpi: {MPI4PY_MISSING.format(python=python)}"

    # Ranks write the same phase/outcome report as the built-in probe; judge it the same way.
    interpret = BuiltinProbe.interpret
