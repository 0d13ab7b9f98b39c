"""One process per rank on this host; emulated nodes via per-node NCCL_HOSTID.

With distinct NCCL_HOSTIDs NCCL hashes the ranks as different hosts, so P2P
and SHM are off between them and traffic takes the NET transport (NET/Socket
over loopback here): a node x ppn grid emulated on one box. Where each rank goes
(its GPU, host id, emulated host name) is planning.placement's; option
``emulate_hosts: true`` (``--emulate-hosts``) lets ranks share the GPUs as emulated
hosts and record the host they ran as (emh0, emh1, ...).
"""

from __future__ import annotations

import os
import socket
from typing import Any, Mapping, Optional

from envmatrix.boundary import EMULATED_HOST_VAR, RESULT_DIR_VAR, ProcessSpec
from envmatrix.env.merge import compose_rank_env
from envmatrix.errors import ConfigError
from envmatrix.launchers.base import LaunchContext, Launcher, LaunchPlan, RankSlot, register
from envmatrix.planning.placement import Placement, emulated_hostid, place
from envmatrix.planning.plan import Run

# Below the setup's atoms, so a setup can still name another interface.
LOOPBACK_DEFAULTS = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}


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
    if slot.host_id:
        env["NCCL_HOSTID"] = slot.host_id
    elif grid.nodes > 1:
        env["NCCL_HOSTID"] = emulated_hostid(slot.node)
    return env


def check_emulate_hosts(value: Any, where: str = "launcher_opts.local.emulate_hosts") -> bool:
    """``emulate_hosts``: true/false, or {namespaces: true|false}; ConfigError (one line) otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, Mapping) and set(value) <= {"namespaces"} and all(isinstance(v, bool) for v in value.values()):
        return True
    raise ConfigError(f"{where}: {value!r} not allowed; allowed: true, false or {{namespaces: true|false}}")


@register
class LocalLauncher(Launcher):
    name = "local"
    # Each process is a rank on this host: the warm pool may fork it, SIGUSR1 reaches the rank itself, and
    # there is no launcher output to read (the Launcher defaults for rank_exits / launcher_failure).
    uses_warm_pool = True
    forwards_stack_signal = True
    reports_env = False  # ranks start without the shim (no rank{R}.env.json); a probe's own env echo is still checked
    option_defaults = {"emulate_hosts": False}

    def __init__(self, options: Optional[Mapping[str, Any]] = None) -> None:
        opts = dict(options or {})
        unknown = sorted(set(opts) - set(self.option_defaults))
        if unknown:
            raise ConfigError(f"launcher_opts.local: unknown key {unknown[0]!r}; allowed: {', '.join(self.option_defaults)}")
        value = opts.get("emulate_hosts", False)
        self.emulates_hosts = check_emulate_hosts(value)
        self.host_namespaces = isinstance(value, Mapping) and bool(value.get("namespaces"))

    def placement(self, run: Run, gpus: int) -> Placement:
        return place(run.grid, run.backend, gpus, self.emulates_hosts)

    def slots(self, run: Run, gpus: int) -> tuple[RankSlot, ...]:
        here = socket.gethostname()
        return tuple(RankSlot(p.rank, p.node, p.local_rank, p.device, p.hostname or here, p.host_id)
                     for p in self.placement(run, gpus).ranks)

    def build(self, run: Run, ctx: LaunchContext) -> LaunchPlan:
        placement = self.placement(run, ctx.gpus)
        slots = self.slots(run, ctx.gpus)
        seats = ctx.host_seats
        if seats and len(seats) < run.grid.nodes:
            raise ConfigError(f"grids: {run.grid.label} needs {run.grid.nodes} emulated hosts but {len(seats)} namespaces were made")
        # In namespaces every host talks over its own interface to the others' addresses; else all over loopback.
        defaults = {"GLOO_SOCKET_IFNAME": seats[0].ifname, "NCCL_SOCKET_IFNAME": seats[0].ifname} if seats else LOOPBACK_DEFAULTS
        envs = []
        procs = []
        for slot in slots:
            seat_vars = {"MASTER_ADDR": seats[0].address} if seats else {}
            env = compose_rank_env(
                inherited=ctx.inherited_env,
                harness_defaults=defaults,
                atoms=run.setup.atoms,
                rank_vars={**ctx.probe_env, **rank_vars(run, slot, ctx), **seat_vars,
                           **({EMULATED_HOST_VAR: slot.host} if placement.emulated_hosts else {})},
                pins=ctx.pins,
            )
            envs.append(env)
            procs.append(
                ProcessSpec(
                    argv=(*(seats[slot.node].argv_prefix if seats else ()), *ctx.rank_argv),
                    env=env,
                    log_path=os.path.join(ctx.workdir, f"rank{slot.rank}.log"),
                    label=f"rank{slot.rank}",
                    cwd=ctx.workdir,
                )
            )
        return LaunchPlan(tuple(procs), slots, tuple(envs), placement=placement.to_json())
