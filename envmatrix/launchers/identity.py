"""Which launcher family each launcher speaks, and its identity as the launcher shim reads it (pure).

The variables themselves are one table, ``envmatrix.boundary.LAUNCHER_RANK_VARS``, which the rank side
(``envmatrix.rank.identity.rank_identity``) reads too; here the launcher's own family comes first.
"""

from __future__ import annotations

from typing import Mapping, Optional

from envmatrix.boundary import LAUNCHER_RANK_VARS, LauncherIdentity, read_launcher_identity

# Which family each launcher speaks; unknown launchers try the table's families in order.
LAUNCHER_FAMILY = {"mpirun": "ompi", "mpiexec": "pals", "srun": "slurm", "torchrun": "torchrun"}
# torchrun's RANK/WORLD_SIZE last: a launcher's own variables beat a RANK the launcher merely inherited.
_ORDER = tuple(f for f in LAUNCHER_RANK_VARS if f != "torchrun") + ("torchrun",)


def launcher_identity(env: Mapping[str, str], launcher: Optional[str] = None) -> Optional[LauncherIdentity]:
    """Identity as the launcher's own variables give it (its family first), or None."""
    preferred = LAUNCHER_FAMILY.get(launcher or "")
    families = ((preferred,) if preferred else ()) + tuple(f for f in _ORDER if f != preferred)
    return read_launcher_identity(env, families)


__all__ = ["LAUNCHER_FAMILY", "LauncherIdentity", "launcher_identity"]
