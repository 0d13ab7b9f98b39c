"""OpenMPI ``mpirun``: one launcher process for all ranks; the env travels with ``-x NAME=VALUE``.

Real nodes: ``--host h1:P,h2:P --map-by ppr:P:node``. One host (CI, a single
node): every rank on this host with ``--oversubscribe``, nodes
emulated by the shim with a per-node NCCL_HOSTID. ``--allow-run-as-root`` only
when running as root. ``--bind-to none`` either way unless the user's extra_args bind.
Values go into argv literally (never through a shell).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from envmatrix.launchers.base import LaunchContext, register
from envmatrix.launchers.failures import LauncherFailure, named, openmpi as openmpi_failure
from envmatrix.launchers.rank_exits import RankExit, openmpi as openmpi_exits
from envmatrix.launchers.shim import Layout, ShimLauncher
from envmatrix.planning.plan import Run


@register
class MpirunLauncher(ShimLauncher):
    name = "mpirun"
    option_defaults = {"hostfile": None}

    def launcher_argv(self, run: Run, ctx: LaunchContext, layout: Layout, deliver: Mapping[str, str],
                      opts: Mapping[str, Any]) -> tuple[str, ...]:
        grid = run.grid
        argv = [self.launcher_binary(opts), "-np", str(grid.world)]
        if layout.emulated:
            argv += ["--host", f"{layout.hosts[0] if layout.hosts else 'localhost'}:{grid.world}",
                     "--map-by", "slot", "--oversubscribe"]
        elif opts["hostfile"]:
            argv += ["--hostfile", str(opts["hostfile"]), "--map-by", f"ppr:{grid.ppn}:node"]
        else:
            argv += ["--host", ",".join(f"{h}:{grid.ppn}" for h in layout.hosts), "--map-by", f"ppr:{grid.ppn}:node"]
        if not _binds(opts["extra_args"]):
            # OpenMPI binds each rank to one core when np <= 2 (a host bisect's pairs): NCCL's proxy and socket
            # threads then share that core; measured on the H200 box, a 2x1 NET/Socket pair ran at 1/200 of its
            # unbound busbw and every pair looked slow. The user's own --bind-to wins, on real and emulated nodes.
            argv += ["--bind-to", "none"]
        if self.as_root:
            argv.append("--allow-run-as-root")
        for name, value in deliver.items():
            argv += ["-x", f"{name}={value}"]
        argv += opts["extra_args"]
        return (*argv, *self.rank_command(ctx))

    def launcher_exits(self, output: str) -> list[RankExit]:
        return openmpi_exits(output)

    def launcher_failure(self, output: str) -> Optional[LauncherFailure]:
        return named(self.name, openmpi_failure(output))


def _binds(extra_args: Sequence[str]) -> bool:
    return any(a.lstrip("-").split("=", 1)[0] == "bind-to" for a in extra_args)
