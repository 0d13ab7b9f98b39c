"""One process per rank on this host; emulated nodes via per-node NCCL_HOSTID.

With distinct NCCL_HOSTIDs NCCL hashes the ranks as different hosts, so P2P
and SHM are off between them and traffic takes the NET transport (NET/Socket
over loopback here): a node x ppn grid emulated on one box.
"""

from __future__ import annotations

import os
import socket

from envmatrix.env.merge import compose_rank_env
from envmatrix.boundary import RESULT_DIR_VAR, ProcessSpec
from envmatrix.launchers.base import LaunchContext, Launcher, LaunchPlan, RankSlot, register
from envmatrix.planning.plan import Run

# Below the setup's atoms, so a setup can still name another interface.
LOOPBACK_DEFAULTS = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}


def emulated_hostid(node: int) -> str:
    return f"envmatrix-node{node}"


def rank_vars(run: Run, slot: RankSlot, ctx: LaunchContext) -> dict[str, str]:
    grid = run.grid
    env = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(ctx.port),
        "RANK": str(slot.rank),
        "WORLD_SIZE": str(grid.world),
        "LOCAL_RANK": str(slot.local_rank),
        "LOCAL_WORLD_SIZE": str(grid.ppn),
        "GROUP_RANK": str(slot.node),
        "ENVMATRIX_NODE": str(slot.node),
        "ENVMATRIX_NNODES": str(grid.nodes),
        "ENVMATRIX_BACKEND": run.backend,
        "ENVMATRIX_RUN_KEY": run.key,
        RESULT_DIR_VAR: ctx.workdir,
    }
    if slot.device is not None:
        env["ENVMATRIX_DEVICE"] = str(slot.device)
    if grid.nodes > 1:
        env["NCCL_HOSTID"] = emulated_hostid(slot.node)
    return env


@register
class LocalLauncher(Launcher):
    name = "local"
    # Each process is a rank on this host: the warm pool may fork it, SIGUSR1 reaches the rank itself, and
    # there is no launcher output to read (the Launcher defaults for rank_exits / launcher_failure).
    uses_warm_pool = True
    forwards_stack_signal = True
    reports_env = False  # ranks start without the shim (no rank{R}.env.json); a probe's own env echo is still checked

    def slots(self, run: Run, gpus: int) -> tuple[RankSlot, ...]:
        grid = run.grid
        use_gpu = run.backend == "nccl"
        return tuple(
            RankSlot(r, grid.node_of(r), grid.local_rank_of(r), r if use_gpu else None, socket.gethostname())
            for r in range(grid.world)
        )

    def build(self, run: Run, ctx: LaunchContext) -> LaunchPlan:
        slots = self.slots(run, ctx.gpus)
        envs = []
        procs = []
        for slot in slots:
            env = compose_rank_env(
                inherited=ctx.inherited_env,
                harness_defaults=LOOPBACK_DEFAULTS,
                atoms=run.setup.atoms,
                rank_vars={**ctx.probe_env, **rank_vars(run, slot, ctx)},
                pins=ctx.pins,
            )
            envs.append(env)
            procs.append(
                ProcessSpec(
                    argv=tuple(ctx.rank_argv),
                    env=env,
                    log_path=os.path.join(ctx.workdir, f"rank{slot.rank}.log"),
                    label=f"rank{slot.rank}",
                    cwd=ctx.workdir,
                )
            )
        return LaunchPlan(tuple(procs), slots, tuple(envs))
