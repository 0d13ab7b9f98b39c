"""The process boundary, the one vocabulary both sides share: what a run is told and what it reports.

The driver tells a process its argv, env and log file (:class:`ProcessSpec`); each rank finds its
result directory in ``ENVMATRIX_RESULT_DIR`` and reports there: ``rank{R}.json`` (the probe's phases,
checks and timings) and ``rank{R}.env.json`` (what the launcher shim saw). The process itself ends
with a :class:`ProcessOutcome`. Stdlib only: rank processes import it without the driver.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Optional

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
