"""Which torch.distributed backends read which variables (pure).

gloo never loads NCCL or its net plugin, so a sweep/bisect/search that only varies NCCL_*/FI_* under
backend=gloo measures nothing: every cell passes and a search "best" is noise. This table is the one
place that knows it; sweep, bisect and search call :func:`check_varied`.

Unknown names count as read by every backend: the check only speaks when it is sure.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

from envmatrix.errors import ConfigError

NCCL, GLOO = "nccl", "gloo"
BOTH = frozenset({NCCL, GLOO})

# (exact name or prefix ending in "_", backends that read it); first match wins, so specific entries come first.
READERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("NCCL_NVLS_ENABLE", frozenset({NCCL})),
    ("TORCH_NCCL_", frozenset({NCCL})),  # ProcessGroupNCCL only
    ("TORCH_SYMM_MEM_", frozenset({NCCL})),
    ("TORCH_", BOTH),  # TORCH_DISTRIBUTED_DEBUG and friends: c10d, any backend
    ("NCCL_", frozenset({NCCL})),
    ("FI_", frozenset({NCCL})),  # libfabric, reached only through the aws-ofi-nccl net plugin
    ("UCX_", frozenset({NCCL})),  # UCX, reached only through the nccl-rdma-sharp/UCX net plugin
    ("NVSHMEM_", frozenset({NCCL})),
    ("CUDA_", frozenset({NCCL})),  # gloo here runs on CPU tensors
    ("GLOO_", frozenset({GLOO})),
    ("MASTER_ADDR", BOTH),
    ("MASTER_PORT", BOTH),
    ("TP_SOCKET_IFNAME", BOTH),
)

# A path entry naming NCCL or its net plugins (aws-ofi-nccl, libnccl-net) is a plugin path: only NCCL dlopens it.
_PLUGIN_PATH = re.compile(r"nccl|ofi|net[-_]plugin", re.IGNORECASE)
PATH_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD")


def readers(var: str, value: str = "") -> frozenset[str]:
    """Backends that read ``var`` (``value``: a path-list entry, to tell plugin paths from others)."""
    if var in PATH_VARS:
        return frozenset({NCCL}) if _PLUGIN_PATH.search(value or "") else BOTH
    for key, backends in READERS:
        if var == key or (key.endswith("_") and var.startswith(key)):
            return backends
    return BOTH


def ignored_by(backend: str, atoms: Iterable) -> list[str]:
    """Names (``VAR`` or ``VAR=entry`` for path entries) among ``atoms`` that ``backend`` never reads, in order.

    ``atoms``: objects with ``var`` and ``value`` (env.atoms.Atom) or plain names.
    """
    return list(dict.fromkeys(_label(a) for a in atoms if backend not in readers(*_var_value(a))))


def _var_value(atom) -> tuple[str, str]:
    return (atom, "") if isinstance(atom, str) else (atom.var, atom.value)


def _label(atom) -> str:
    var, value = _var_value(atom)
    return f"{var}={value}" if var in PATH_VARS and value else var


# Probes that run torch.distributed, so the backend decides what is read. A command probe (nccl-tests, a
# user script) reads NCCL_* itself whatever ``backend`` says: the check does not apply to it.
TORCH_PROBES = ("builtin",)


def backend_governs(probe: str) -> bool:
    return probe in TORCH_PROBES


def check_varied(backend: str, atoms: Iterable, what: str = "sweep", allow: bool = False,
                 probe: str = "builtin") -> Optional[str]:
    """ConfigError (exit 2) when every varied atom is ignored by ``backend``; the warning line when some are.

    ``allow`` (--allow-ignored-vars) turns the error into the warning: env-delivery checks under gloo are legitimate.
    None when nothing is varied or everything varied is read.
    """
    if not backend_governs(probe):
        return None
    atoms = list(atoms)
    ignored = ignored_by(backend, atoms)
    if not ignored:
        return None
    names = ", ".join(ignored[:6]) + (f" (+{len(ignored) - 6} more)" if len(ignored) > 6 else "")
    if not allow and len(ignored) == len({_label(a) for a in atoms}):
        raise ConfigError(
            f"backend: {backend!r} reads none of the variables this {what} varies ({names}); "
            f"every result would be the same; allowed: backend=nccl, variables {backend} reads, or --allow-ignored-vars"
        )
    return f"warning: backend {backend} ignores {names}; results do not depend on them"


def is_meaningful_study(backend: Optional[str], probe: Optional[str] = "builtin") -> bool:
    """Whether a search study may export NCCL tuning (tuner.csv): a torch probe under gloo never ran NCCL."""
    return backend != GLOO or not backend_governs(probe or "builtin")
