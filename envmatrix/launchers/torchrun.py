"""``torchrun`` (torch.distributed.run): one agent per node, c10d rendezvous.

torchrun has no flag that sets a worker's env: workers inherit the agent's
env, so that is its delivery mechanism here (the agent process gets the
inherited env plus the delivered variables). Nodes are agents on this host
(``--nnodes N``, one agent each, rendezvous on loopback); torchrun sets
RANK/LOCAL_RANK/GROUP_RANK and its own MASTER_ADDR/MASTER_PORT, the shim adds
NCCL_HOSTID per emulated node.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from envmatrix.errors import PlanError
from envmatrix.boundary import ProcessSpec
from envmatrix.launchers.base import LaunchContext, register
from envmatrix.launchers.rank_exits import RankExit, torchrun as torchrun_exits
from envmatrix.launchers.shim import Layout, ShimLauncher
from envmatrix.planning.plan import Run


@register
class TorchrunLauncher(ShimLauncher):
    name = "torchrun"
    forwards_stack_signal = False  # the elastic agent handles TERM/INT/HUP/QUIT only; SIGUSR1 would kill it

    def missing_here(self) -> Optional[str]:
        # without launcher_opts.torchrun.binary it is `python -m torch.distributed.run`: torch is the ranks' concern
        return super().missing_here() if self.options()["binary"] else None

    def launcher_binary_argv(self, opts: Mapping[str, Any]) -> list[str]:
        return [str(opts["binary"])] if opts["binary"] else [self.python, "-m", "torch.distributed.run"]

    def agent_argv(self, run: Run, ctx: LaunchContext, opts: Mapping[str, Any]) -> tuple[str, ...]:
        grid = run.grid
        argv = [*self.launcher_binary_argv(opts), f"--nnodes={grid.nodes}", f"--nproc-per-node={grid.ppn}",
                "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{ctx.port}", f"--rdzv-id={run.key}",
                "--max-restarts=0", "--monitor-interval=0.5", *opts["extra_args"], "--no-python"]
        return (*argv, *self.rank_command(ctx))

    def processes(self, run: Run, ctx: LaunchContext, layout: Layout, deliver: Mapping[str, str],
                  opts: Mapping[str, Any]) -> tuple[ProcessSpec, ...]:
        if not layout.emulated:
            raise PlanError(
                f"launcher torchrun: starts its agents on this host only, but hosts {','.join(layout.hosts)} were given; "
                "allowed: launcher=srun or launcher=mpirun for several hosts"
            )
        argv = self.agent_argv(run, ctx, opts)
        env = {**ctx.inherited_env, **deliver}
        for name in ("MASTER_ADDR", "MASTER_PORT"):  # torchrun's rendezvous decides these
            env.pop(name, None)
        return tuple(
            ProcessSpec(argv=argv, env=env, log_path=os.path.join(ctx.workdir, f"torchrun{node}.log"),
                        label=f"torchrun{node}", cwd=ctx.workdir)
            for node in range(run.grid.nodes)
        )

    def process_of_rank(self, run: Run, n_processes: int) -> tuple[int, ...]:
        # c10d assigns group ranks at rendezvous; agent i usually gets node i (not guaranteed).
        return tuple(run.grid.node_of(r) for r in range(run.grid.world))

    def launcher_exits(self, output: str) -> list[RankExit]:
        # the elastic agent's Root Cause / Failures blocks; it has no failure of its own to parse
        return torchrun_exits(output)
