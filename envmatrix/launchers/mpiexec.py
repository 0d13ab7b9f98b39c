"""MPICH-family ``mpiexec`` (Cray PALS on Polaris, MPICH Hydra): ``-n W --ppn P`` and per-variable env flags.

``flavor: pals`` (default) passes ``--env NAME=VALUE``; ``flavor: hydra`` passes
``-genv NAME VALUE``. Hosts go in ``--hosts h1,h2`` (or ``--hostfile``); on one
host every rank runs here (``--ppn W``) and the shim emulates the nodes.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from envmatrix.errors import ConfigError
from envmatrix.launchers.base import LaunchContext, register
from envmatrix.launchers.failures import LauncherFailure, hydra, named
from envmatrix.launchers.shim import Layout, ShimLauncher
from envmatrix.planning.plan import Run

FLAVORS = ("pals", "hydra")


@register
class MpiexecLauncher(ShimLauncher):
    name = "mpiexec"
    option_defaults = {"flavor": "pals", "hostfile": None}
    scheduler, scheduler_var = "pbs", "PBS_JOBID"
    scheduler_hint = "qsub/qsub -I or pass launcher_opts.mpiexec.flavor=hydra with hosts=[...]"

    @classmethod
    def needs_allocation(cls, options: Mapping[str, Any], hosts: Sequence[str]) -> bool:
        # PALS mpiexec talks to the job's PALS daemons: without a PBS job there are none. Hydra runs anywhere.
        return options.get("flavor", "pals") == "pals" and not (hosts or options.get("hosts") or options.get("hostfile"))

    def launcher_argv(self, run: Run, ctx: LaunchContext, layout: Layout, deliver: Mapping[str, str],
                      opts: Mapping[str, Any]) -> tuple[str, ...]:
        flavor = opts["flavor"]
        if flavor not in FLAVORS:
            raise ConfigError(f"launcher_opts.mpiexec.flavor: {flavor!r} not allowed; allowed: {', '.join(FLAVORS)}")
        grid = run.grid
        dash = "--" if flavor == "pals" else "-"
        ppn = grid.world if layout.emulated else grid.ppn
        argv = [self.launcher_binary(opts), "-n", str(grid.world), f"{dash}ppn", str(ppn)]
        if opts["hostfile"] and not layout.emulated:
            argv += [f"{dash}hostfile", str(opts["hostfile"])]
        elif layout.hosts:
            argv += [f"{dash}hosts", ",".join(layout.hosts)]
        for name, value in deliver.items():
            argv += ["--env", f"{name}={value}"] if flavor == "pals" else ["-genv", name, value]
        argv += opts["extra_args"]
        return (*argv, *self.rank_command(ctx))

    def launcher_failure(self, output: str) -> Optional[LauncherFailure]:
        return named(self.name, hydra(output))
