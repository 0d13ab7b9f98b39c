"""Variables the launcher sets for every rank (RANK, WORLD_SIZE, MASTER_ADDR, NCCL_HOSTID on a multi-node grid, ...):
a setup, ``--env`` or env-file line that sets or unsets one is refused before anything runs.

The launcher's rank layer goes on top of the setup's atoms (env/merge.compose_rank_env), so such an atom never
reached a rank while the stored row kept it as the run's intended env. Which names a launcher owns is not listed
here a second time: each grid's launch is planned (as --dry-run plans it, nothing started) with every variable in
question set to a marker value, and the names whose marker did not survive are the launcher's; the names of
boundary.LAUNCHER_RANK_VARS (the rank identity a launcher such as mpirun or srun sets itself, after the driver's
env) are the launcher's everywhere. The probe's own variables (probe.nccl_debug's NCCL_DEBUG) are not launcher-owned.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Iterable, Mapping, Sequence

from envmatrix.boundary import LAUNCHER_RANK_VARS
from envmatrix.env.atoms import PATH_OPS, Atom, Setup
from envmatrix.errors import ConfigError

_MARKER = "envmatrix-owned-check"
IDENTITY_NAMES = frozenset(name for family in LAUNCHER_RANK_VARS.values() for names in family for name in names)


def launcher_owned(names: Iterable[str], grid: Any, launcher: Any, launcher_name: str, probe_spec: Any, backend: str,
                   gpus: int, environ: Mapping[str, str], pins: Mapping[str, str]) -> dict[str, str]:
    """Of ``names``, those the launcher sets on ``grid``: name -> what the ranks get instead (rank 0's value)."""
    names = sorted(set(names) - set(pins))
    owned: dict[str, str] = {}
    if not names:
        return owned
    from envmatrix.engine.launch import launch_context
    from envmatrix.planning.plan import plan_runs
    from envmatrix.probes import get_probe

    probe = get_probe(probe_spec.name)
    marked = Setup("owned-check", tuple(Atom(n, "set", _MARKER) for n in names))
    run = plan_runs([marked], [grid], probe_spec, backend, launcher_name)[0]
    ctx = launch_context(run, probe, "/envmatrix-owned-check", environ, pins, gpus, sys.executable, 29500)
    for env in launcher.build(run, ctx).intended_env:
        for name in names:
            if env.get(name) != _MARKER and name not in ctx.probe_env and name not in owned:
                given = f"{name}={env[name]}" if name in env else f"unset {name}"
                owned[name] = f"would be replaced by the launcher's {given} on {grid.label}, set for every rank"
    owned.update({n: "is rank identity: launchers such as srun and mpirun set it, and each rank reads it to learn who "
                     "it is" for n in names if n in IDENTITY_NAMES and n not in owned})
    return owned


def check_launcher_owned(setups: Sequence[Setup], grids: Sequence[Any], owned_on: Callable[[set, Any], dict],
                         prefix: Callable[[Setup], str]) -> None:
    """Refuse the first atom of ``setups`` that sets or unsets a variable ``owned_on(names, grid)`` says the launcher
    sets there; ``prefix(setup)`` is the message's start up to the variable (``c.yaml: setups.a.``, ``--env ``)."""
    names = {a.var for s in setups for a in s.atoms if a.op not in PATH_OPS}
    for grid in grids:
        owned = owned_on(names, grid)
        for setup in setups:
            for atom in setup.atoms:
                if atom.var in owned and atom.op not in PATH_OPS:
                    raise ConfigError(
                        f"{prefix(setup)}{atom.var}: {atom} {owned[atom.var]}; allowed: leave {atom.var} out")


def owned_checker(inp: Any, gpus: int, pins: Mapping[str, str], launcher: Any = None) -> Callable[[set, Any], dict]:
    """``owned_on`` of :func:`check_launcher_owned` for a resolved config (its launcher, probe and backend)."""
    launcher = launcher if launcher is not None else inp.make_launcher()
    return lambda names, grid: launcher_owned(names, grid, launcher, inp.launcher, inp.probe, inp.backend, gpus,
                                              os.environ, pins)


def check_atoms_owned(inp: Any, atoms: Sequence[Atom], grid: Any, gpus: int, pins: Mapping[str, str],
                      prefix: str) -> None:
    """Atoms from a flag or file (``--env``, ``--env-file``), refused as a config setup's are; ``prefix`` up to the
    variable (``--env ``, ``e.env: ``)."""
    check_launcher_owned([Setup("flag", tuple(atoms))], [grid], owned_checker(inp, gpus, pins), lambda _: prefix)
