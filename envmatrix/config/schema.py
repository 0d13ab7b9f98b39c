"""The typed top level of every sweep/bisect/search config (Hydra structured config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class SweepSchema:
    name: Optional[str] = None
    backend: str = "auto"  # auto | nccl | gloo
    grids: Any = "auto"  # "auto" or a list of NxP
    launcher: str = "local"
    setups: Dict[str, Any] = field(default_factory=dict)
    strategies: List[Any] = field(default_factory=list)
    probe: Dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    max_local_ranks: int = 16
    description: Optional[str] = None
    search: Dict[str, Any] = field(default_factory=dict)  # envmatrix search: space, objective, sampler, storage
    hosts: List[str] = field(default_factory=list)  # cluster launchers: hosts to run on (default: the allocation)
    launcher_opts: Dict[str, Any] = field(default_factory=dict)
    expect: Dict[str, Any] = field(default_factory=dict)  # busbw floors / time ceilings per collective and size (thresholds.py)
    hermetic: bool = False  # hide ~/.nccl.conf and pin what /etc/nccl.conf would fill (env.hermetic)  # per launcher name, e.g. {mpirun: {no_export: [X]}}
