"""The process boundary, the one vocabulary both sides share: what a run is told and what it reports.

The driver tells a process its argv, env and log file (:class:`ProcessSpec`); each rank finds its
result directory in ``ENVMATRIX_RESULT_DIR`` and reports there: ``rank{R}.json`` (the probe's phases,
checks and timings) and ``rank{R}.env.json`` (what the launcher shim saw: :func:`echoed_env` and its
:func:`env_digest`, which the driver's delivery check reads back). The process itself ends with a
:class:`ProcessOutcome`. Stdlib only: rank processes import it without the driver.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

RESULT_DIR_VAR = "ENVMATRIX_RESULT_DIR"


@dataclass(frozen=True)
class ProcessSpec:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    log_path: str
    label: str = ""
    cwd: Optional[str] = None


@dataclass
class ProcessOutcome:
    label: str
    pid: Optional[int]
    exit_code: Optional[int]
    signal: Optional[str]
    killed_by: Optional[str]  # "timeout" | "peer_failure" | None
    ended_at: float
    launch_error: Optional[str] = None


def rank_report_path(result_dir: str, rank: int) -> str:
    return os.path.join(result_dir, f"rank{rank}.json")


def env_report_path(result_dir: str, rank: int) -> str:
    return os.path.join(result_dir, f"rank{rank}.env.json")


# ----------------------------------------------------------------------------- the env a rank reports

ECHO_PREFIXES = ("NCCL_", "FI_", "LD_", "GLOO_", "TORCH_", "NVSHMEM_", "CUDA_", "UCX_", "MASTER_", "ENVMATRIX_")
ECHO_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def is_echoed(name: str) -> bool:
    return name.startswith(ECHO_PREFIXES) or name in ECHO_NAMES


def echoed_env(env: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The slice of a rank's env that can change communication (and no secrets), plus ``extra`` names."""
    wanted = set(extra)
    return {k: v for k, v in sorted(env.items()) if is_echoed(k) or k in wanted}


def env_digest(env: Mapping[str, str]) -> str:
    """sha256 of the canonical JSON of ``env`` (what the shim writes next to the env it saw)."""
    return hashlib.sha256(json.dumps(dict(sorted(env.items())), sort_keys=True).encode()).hexdigest()
