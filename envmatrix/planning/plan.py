"""(setups x grids x probe) -> runs with stable ids.

The run key hashes everything that changes what a run measures (setup atoms,
grid, probe spec, backend, launcher, a shaped network condition's value) and nothing
else, so a resumed sweep skips exactly the runs already done, an edited setup is run again, and bisect/search
reuse stored results of the same env.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from envmatrix.env.atoms import Setup
from envmatrix.planning.grid import Grid

if TYPE_CHECKING:
    from envmatrix.network.conditions import Condition


@dataclass(frozen=True)
class ProbeSpec:
    """Which probe to run per rank and its parameters (JSON-able)."""

    name: str
    params_json: str = "{}"

    @classmethod
    def make(cls, name: str, params: Mapping[str, Any]) -> "ProbeSpec":
        return cls(name, json.dumps(dict(params), sort_keys=True, default=str))

    @property
    def params(self) -> dict[str, Any]:
        return json.loads(self.params_json)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "params": self.params}


@dataclass(frozen=True)
class Run:
    key: str
    setup: Setup
    grid: Grid
    probe: ProbeSpec
    backend: str
    launcher: str
    network: Optional["Condition"] = None  # the network axis' condition; None: not on the axis (unshaped)

    @property
    def shaped(self) -> bool:
        return self.network is not None and self.network.shaped

    def to_json(self) -> dict[str, Any]:
        out = {
            "key": self.key,
            "setup": self.setup.to_json(),
            "grid": self.grid.label,
            "probe": self.probe.to_json(),
            "backend": self.backend,
            "launcher": self.launcher,
        }
        if self.network is not None:
            out["network"] = {"name": self.network.name, "value": self.network.describe()}
        return out


def run_key(setup: Setup, grid: Grid, probe: ProbeSpec, backend: str, launcher: str,
            network: Optional["Condition"] = None) -> str:
    # The setup's name is left out on purpose: the same env on the same grid and probe is
    # the same measurement, so bisect and search reuse what a sweep already ran. So is a condition's name (its
    # value is what is measured), and an unshaped condition adds nothing: keys of runs before the axis still hold.
    ident = {
        "atoms": [a.to_json() for a in setup.atoms],
        "grid": grid.label,
        "probe": probe.to_json(),
        "backend": backend,
        "launcher": launcher,
    }
    if network is not None and network.shaped:
        ident["network"] = network.describe()
    canon = json.dumps(ident, sort_keys=True)
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def plan_runs(
    setups: Sequence[Setup],
    grids: Sequence[Grid],
    probe: ProbeSpec,
    backend: str,
    launcher: str,
    conditions: Sequence[Optional["Condition"]] = (None,),
) -> list[Run]:
    """Grid-major order: the cheapest grids first surface broken setups soonest; each (setup, grid) under every
    network condition in turn."""
    ordered = sorted(grids, key=lambda g: (g.world, g.nodes))
    return [
        Run(run_key(s, g, probe, backend, launcher, c), s, g, probe, backend, launcher, c)
        for g in ordered
        for s in setups
        for c in (conditions or (None,))
    ]
