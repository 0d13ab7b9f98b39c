"""The one env-merge function every launcher, probe and bisect uses.

Layering (later wins): inherited env < harness defaults < setup atoms <
rank identity < safety pins. The pins (NVLink multicast off) are taken from the
caller's env and can never be overridden by a setup.
"""

from __future__ import annotations

import os
from typing import Mapping, Sequence

from envmatrix.env.atoms import APPEND, PREPEND, SET, UNSET, Atom

# NVLink multicast off: the only value of each pin envmatrix ever passes to a rank. Multicast can take a shared
# host's GPUs down for days, so no setup, --env, env file or search value may turn it on, even where the caller's
# environment leaves a pin unset (then nothing is pinned to pass through).
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
SAFETY_PINS = tuple(MULTICAST_OFF)


def caller_pins(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The safety pins set in the caller's env (only those that are set)."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in SAFETY_PINS if k in environ}


def materialize(base: Mapping[str, str], atoms: Sequence[Atom]) -> dict[str, str]:
    """Apply atoms on top of ``base``; path atoms keep their reading order."""
    env = dict(base)
    sets = {a.var: a for a in atoms if a.op in (SET, UNSET)}
    for var, atom in sets.items():
        if atom.op == UNSET:
            env.pop(var, None)
        else:
            env[var] = atom.value
    path_vars = dict.fromkeys(a.var for a in atoms if a.op in (PREPEND, APPEND))
    for var in path_vars:
        front = [a.value for a in atoms if a.var == var and a.op == PREPEND]
        back = [a.value for a in atoms if a.var == var and a.op == APPEND]
        middle = [env[var]] if env.get(var) else []
        env[var] = ":".join(front + middle + back)
    return env


def compose_rank_env(
    inherited: Mapping[str, str],
    harness_defaults: Mapping[str, str],
    atoms: Sequence[Atom],
    rank_vars: Mapping[str, str],
    pins: Mapping[str, str],
) -> dict[str, str]:
    env = materialize({**inherited, **harness_defaults}, atoms)
    env.update(rank_vars)
    env.update(pins)
    return env
