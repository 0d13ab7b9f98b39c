"""Slurm ``srun`` inside an allocation: ``--nodes --ntasks-per-node --export=ALL,NAME=VALUE,...``.

``--export`` is comma-separated and Slurm keeps quotes in values, so a value
holding a comma (NCCL_IB_HCA=mlx5_0,mlx5_1) cannot be written there: it is
named alone (``--export=ALL,...,NCCL_IB_HCA``), which makes srun propagate the
value from its own env, and only such values are added to srun's env. So is a
variable srun already has with another value: ``--export=ALL,NAME=value`` does
not override srun's own NAME (seen with Slurm 22.05: a prepended PYTHONPATH
never reached the ranks; the probe contract's srun cases catch it).
``--kill-on-bad-exit=1`` ends the step when a rank fails, like mpirun. On a
one-node allocation the nodes are emulated there (``--overcommit``).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from envmatrix.boundary import ProcessSpec
from envmatrix.launchers.base import LaunchContext, register
from envmatrix.launchers.failures import LauncherFailure, named, slurm as slurm_failure
from envmatrix.launchers.rank_exits import RankExit, slurm as slurm_exits
from envmatrix.launchers.shim import Layout, ShimLauncher
from envmatrix.planning.plan import Run


def needs_env(name: str, value: str, inherited: Mapping[str, str]) -> bool:
    return "," in value or inherited.get(name, value) != value


def export_flag(deliver: Mapping[str, str], inherited: Mapping[str, str]) -> str:
    items = [n if needs_env(n, v, inherited) else f"{n}={v}" for n, v in deliver.items()]
    return "--export=" + ",".join(["ALL", *items])


@register
class SrunLauncher(ShimLauncher):
    name = "srun"
    scheduler, scheduler_var = "slurm", "SLURM_JOB_ID"
    scheduler_hint = "salloc/sbatch or pass launcher=mpirun (or local) with hosts=[...]"
    option_defaults = {"mpi": None}  # e.g. "pmix", "none": passed as --mpi=...

    def launcher_argv(self, run: Run, ctx: LaunchContext, layout: Layout, deliver: Mapping[str, str],
                      opts: Mapping[str, Any]) -> tuple[str, ...]:
        grid = run.grid
        nodes, per_node = (1, grid.world) if layout.emulated else (grid.nodes, grid.ppn)
        argv = [self.launcher_binary(opts), f"--nodes={nodes}", f"--ntasks={grid.world}", f"--ntasks-per-node={per_node}"]
        if layout.hosts:
            argv.append(f"--nodelist={','.join(layout.hosts)}")
        if layout.emulated:
            argv.append("--overcommit")
        argv += [f"--job-name=envmatrix-{run.key}", "--kill-on-bad-exit=1", "--unbuffered"]
        if opts["mpi"]:
            argv.append(f"--mpi={opts['mpi']}")
        argv.append(export_flag(deliver, ctx.inherited_env))
        argv += opts["extra_args"]
        return (*argv, *self.rank_command(ctx))

    def processes(self, run: Run, ctx: LaunchContext, layout: Layout, deliver: Mapping[str, str],
                  opts: Mapping[str, Any]) -> tuple[ProcessSpec, ...]:
        argv = self.launcher_argv(run, ctx, layout, deliver, opts)
        env = {**ctx.inherited_env, **{n: v for n, v in deliver.items() if needs_env(n, v, ctx.inherited_env)}}
        return (ProcessSpec(argv=argv, env=env, log_path=os.path.join(ctx.workdir, "srun.log"), label="srun", cwd=ctx.workdir),)

    def launcher_exits(self, output: str) -> list[RankExit]:
        return slurm_exits(output)

    def launcher_failure(self, output: str) -> Optional[LauncherFailure]:
        return named(self.name, slurm_failure(output))
