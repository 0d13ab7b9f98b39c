"""Launchers turn a run into process specs (pure); execution.processes runs them."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from envmatrix.launchers.base import LaunchContext, Launcher, LaunchPlan, RankSlot, get_launcher, launcher_names, register
from envmatrix.launchers import local as _local  # noqa: F401  (registers "local")
from envmatrix.launchers import mpiexec as _mpiexec  # noqa: F401  (registers "mpiexec")
from envmatrix.launchers import mpirun as _mpirun  # noqa: F401  (registers "mpirun")
from envmatrix.launchers import srun as _srun  # noqa: F401  (registers "srun")
from envmatrix.launchers import torchrun as _torchrun  # noqa: F401  (registers "torchrun")


def configure_launcher(
    name: str,
    options: Optional[Mapping[str, Any]] = None,
    hosts: Sequence[str] = (),
    grids: Sequence[Any] = (),
    backend: str = "gloo",
    environ: Optional[Mapping[str, str]] = None,
    placeholder_nodes: int = 0,
) -> Launcher:
    """The launcher ``name`` with its options (config ``launcher_opts.<name>``) and hosts, checked at plan time.

    Inside a Slurm/PBS allocation every grid is checked against the nodes and GPUs allocated
    (PlanError, exit 2, before anything runs; ``launcher.check_allocation`` for grids known later).
    Reads PBS_NODEFILE when set.
    """
    from envmatrix.errors import ConfigError
    from envmatrix.launchers.allocation import detect
    from envmatrix.launchers.shim import ShimLauncher

    cls = type(get_launcher(name))
    if not issubclass(cls, ShimLauncher):
        if hosts:  # every rank of such a launcher starts on this machine: the hosts would be ignored without a word
            raise ConfigError(f"hosts: {', '.join(hosts)}: launcher {name!r} starts every rank on this machine and reads "
                              "no hosts; allowed: launcher=mpirun, mpiexec, srun or torchrun with hosts, or no hosts "
                              "(--emulate-hosts emulates several hosts here)")
        if getattr(cls, "option_defaults", None) is not None:
            return cls(options=dict(options or {}))  # type: ignore[call-arg]  (the local launcher's emulate_hosts)
        if options:
            raise ConfigError(f"launcher_opts.{name}: launcher {name!r} takes no options")
        return cls()

    def read_text(path: str) -> str:
        with open(path) as fh:
            return fh.read()

    import os

    env = os.environ if environ is None else environ
    alloc = detect(env, read_text)
    if alloc is None and cls.needs_allocation(dict(options or {}), tuple(hosts)):
        if placeholder_nodes:
            # A dry run checks a submission before there is an allocation: placeholders stand for its values.
            from envmatrix.launchers.allocation import Allocation

            alloc = Allocation(str(cls.scheduler), f"<{cls.scheduler_var}>",
                               tuple(f"<node{i}>" for i in range(1, placeholder_nodes + 1)))
        else:
            # Checked once here: otherwise every run launches and fails alone with the launcher's own message.
            raise ConfigError(f"launcher={name}: no allocation: run inside {cls.scheduler_hint}; "
                              f"{cls.scheduler_var} is not set")
    launcher = cls(options=dict(options or {}), hosts=tuple(hosts), allocation=alloc)
    if alloc is not None and alloc.job_id.startswith("<"):
        launcher.allocation_note = (f"dry run outside an allocation: {alloc.job_id} and the nodes "
                                    f"{', '.join(alloc.nodes)} are placeholders for the allocation's values")
    launcher.check_allocation(grids, backend, env)
    return launcher


__all__ = ["LaunchContext", "Launcher", "LaunchPlan", "RankSlot", "configure_launcher", "get_launcher", "launcher_names", "register"]
