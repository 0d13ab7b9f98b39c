"""Launcher ABC + registry (torch elastic's rendezvous registry idea)."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from envmatrix.boundary import ProcessOutcome, ProcessSpec
from envmatrix.planning.plan import Run
from envmatrix.registry import Registry

if TYPE_CHECKING:  # the launcher's account and failure records, defined next to their parsers
    from envmatrix.launchers.failures import LauncherFailure
    from envmatrix.launchers.rank_exits import RankExit


@dataclass(frozen=True)
class RankSlot:
    rank: int
    node: int
    local_rank: int
    device: Optional[int]  # GPU index on the host, None on CPU
    # Where the launcher is told to start the rank; names the host of a rank that died before it could say.
    host: Optional[str] = None
    # Its NCCL_HOSTID when the launcher places ranks as emulated hosts (planning.placement); None: the launcher's way.
    host_id: Optional[str] = None


@dataclass(frozen=True)
class HostSeat:
    """An emulated host with a network namespace of its own (``emulate_hosts: {namespaces: true}``): its name, the
    argv prefix that starts a process inside it (execution.netns.netns_argv), its address on the bridge, and its
    namespace (``netns``), whose ``ifname`` is the host's link: where a network condition shapes its egress."""

    name: str
    argv_prefix: tuple[str, ...]
    address: str
    ifname: str = "eth0"
    netns: str = ""


@dataclass(frozen=True)
class LaunchContext:
    """Everything a launcher needs besides the run; all values are plain data."""

    workdir: str
    inherited_env: Mapping[str, str]
    pins: Mapping[str, str]
    rank_argv: tuple[str, ...]
    probe_env: Mapping[str, str] = field(default_factory=dict)
    port: int = 29500
    gpus: int = 0
    # One per emulated node when the engine gave each its own network namespace; () = every rank in this one.
    host_seats: tuple[HostSeat, ...] = ()


@dataclass(frozen=True)
class LaunchPlan:
    processes: tuple[ProcessSpec, ...]
    slots: tuple[RankSlot, ...]
    # The env each rank is meant to see (the env-delivery check compares it with what ranks report).
    intended_env: tuple[Mapping[str, str], ...]
    # Which process hosts each rank (mpirun/srun start one process for many ranks); None: rank i -> process i.
    process_of_rank: Optional[tuple[int, ...]] = None
    # Files holding each rank's output; None: the hosting process's log.
    rank_logs: Optional[tuple[tuple[str, ...], ...]] = None
    # Where the ranks sit on this host's GPUs (planning.placement.Placement.to_json), stored with the result;
    # {} for a launcher whose ranks another program places (mpirun, srun, torchrun).
    placement: Mapping[str, object] = field(default_factory=dict)

    def process_index(self, rank: int) -> int:
        return rank if self.process_of_rank is None else self.process_of_rank[rank]

    def logs_of(self, rank: int) -> tuple[str, ...]:
        if self.rank_logs is None:
            return (self.processes[self.process_index(rank)].log_path,)
        return self.rank_logs[rank]


class Launcher(abc.ABC):
    """Builds the processes of a run (``build``, pure) and answers the engine's questions about them.

    Every hook the engine (engine/launch.py, engine/session.py) or the planner (config/resolve.py) calls is
    declared here with its default; a launcher overrides the ones where it differs.
    """

    # Its name in configs, run keys and messages (``launcher=mpirun``).
    name: str = ""
    # The hang diagnosis sends SIGUSR1 to each launched process: a rank itself, or a launcher that passes it
    # on to its ranks (mpirun, srun, Hydra). False: the launcher would die of it; its children get it instead.
    forwards_stack_signal: bool = True
    # True: every rank writes rank{R}.env.json (the shim does), so a passed run without them is an env_mismatch.
    reports_env: bool = False
    # True: its processes are ranks forked on this host, so the warm pool (execution/pool.py) may start them.
    uses_warm_pool: bool = False
    # True: ranks may share this host's GPUs as emulated hosts (local launcher, --emulate-hosts): grids larger
    # than the GPUs are placed round-robin (planning.placement) instead of refused.
    emulates_hosts: bool = False
    # A dry run outside the batch allocation the launcher needs: what its placeholders stand for ("" otherwise).
    allocation_note: str = ""
    # True: each emulated host wants a network namespace of its own on a bridge (root only); the engine makes them
    # for the session (envmatrix.cluster) and hands them over as LaunchContext.host_seats.
    host_namespaces: bool = False

    @abc.abstractmethod
    def build(self, run: Run, ctx: LaunchContext) -> LaunchPlan:
        """Pure: argv/env for every process of ``run``; starts nothing."""

    def map_outcome(self, outcome: ProcessOutcome) -> ProcessOutcome:
        """How a launched process really ended (mpirun/srun report a rank's signal N as exit code 128+N)."""
        return outcome

    def rank_exits(self, output: str) -> list["RankExit"]:
        """The ranks this launcher's output says failed, first observed first; [] when it names none (a launcher
        whose processes are the ranks has nothing to add to their exit statuses). A shim launcher's ranks also say
        when their probe ended by itself, exit 0 included (``RankExit.from_shim``)."""
        return []

    def launcher_failure(self, output: str) -> Optional["LauncherFailure"]:
        """The failure of the launcher itself (could not start or keep its ranks) its output reports, or None."""
        return None

    def node_hosts(self, environ: Mapping[str, str]) -> tuple[str, ...]:
        """The hosts a grid's nodes run on, one per node, when they are separate machines; () when every
        rank runs on this host (grids are then checked against this host alone)."""
        return ()

    def check_allocation(self, grids: Sequence[object], backend: str, environ: Mapping[str, str]) -> None:
        """PlanError (exit 2) for a grid the batch allocation this runs in cannot hold; none: nothing to check."""

    def missing_here(self) -> Optional[str]:
        """Why this launcher cannot start on this host (its program is not here), as one line naming the key and
        what is allowed; None: nothing missing. Asked once before a command launches (not by a dry run, which may
        be printing lines for another machine)."""
        return None


_REGISTRY: Registry[type[Launcher]] = Registry("launcher")
register = _REGISTRY.decorator("name")
launcher_names = _REGISTRY.names


def get_launcher(name: str) -> Launcher:
    return _REGISTRY.get(name, "launcher")()
