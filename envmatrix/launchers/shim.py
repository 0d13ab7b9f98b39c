"""The per-rank shim and the base class of launchers that start ranks through it.

Rank side (``python -m envmatrix.launchers.shim -- PROBE ARGV...``), started by
mpirun/mpiexec/srun/torchrun once per rank:

1. reads the launcher's identity variables (OMPI_COMM_WORLD_*, PALS_*/PMI_*,
   SLURM_*, torchrun's RANK/LOCAL_RANK) and derives RANK/WORLD_SIZE/LOCAL_RANK/
   GROUP_RANK (+ MASTER_ADDR/MASTER_PORT when the launcher gave none) for
   torch.distributed, and NCCL_HOSTID per emulated node (ENVMATRIX_EMULATE=1);
2. unsets the names in ENVMATRIX_UNSET (a setup's ``null`` values: launchers can
   only add variables);
3. writes ``rank{R}.env.json`` into ENVMATRIX_RESULT_DIR: the variables it
   really saw (boundary.echoed_env plus ENVMATRIX_CHECK_VARS) and their sha256;
4. starts the probe (stdout/stderr to ``rank{R}.log`` there) in its own
   process group and stays as its supervisor: when the launcher dies or
   signals the rank (mpirun puts ranks in their own process groups, so the
   driver's kill cannot reach them), the probe's whole group is killed; the
   shim exits like the probe did (same code, same signal), and says how in
   the launcher's output when the probe ended by itself (so a run killed at
   its timeout still tells the ranks that had passed from the one that hung:
   launchers.rank_exits.shim). SIGUSR1 (the
   driver's stack-dump request at a timeout, forwarded by the launcher) is
   passed on to the probe alone.

Driver side: :class:`ShimLauncher` builds the launcher's argv purely. The
launcher process gets the inherited env only; setup variables reach ranks
only through the launcher's own mechanism (``-x``, ``--env``, ``--export``),
so a variable the launcher fails to pass really is missing on the ranks, and
probes.delivery says so.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from envmatrix.env.atoms import UNSET
from envmatrix.env.merge import compose_rank_env
from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.execution.processes import boot_ticks, fork_exec_in_group, kill_strays, signal_name
from envmatrix.boundary import (RESULT_DIR_VAR, ProcessOutcome, ProcessSpec, echoed_env, env_digest, env_report_path,
                                rank_var_names)
from envmatrix.launchers.base import LaunchContext, Launcher, LaunchPlan, RankSlot
from envmatrix.launchers.identity import launcher_identity
from envmatrix.launchers.local import LOOPBACK_DEFAULTS, emulated_hostid, rank_vars as local_rank_vars
from envmatrix.launchers.rank_exits import RankExit, shim as shim_exits, shim_exit_line, shim_stack_request_line
from envmatrix.planning.grid import check_nodes
from envmatrix.planning.plan import Run
from envmatrix.probes.delivery import checked_names

SHIM_MODULE = "envmatrix.launchers.shim"
# Options every shim launcher takes (config ``launcher_opts.<name>``).
COMMON_OPTIONS = {
    "hosts": None,  # hosts to run on; default: config hosts, else the allocation's nodes, else this host
    "emulate": "auto",  # auto: emulate nodes (NCCL_HOSTID per node) when only one host is available
    "no_export": [],  # site variables the launcher must not forward (the delivery check then reports them)
    "extra_args": [],  # appended to the launcher's own options
    "binary": None,  # launcher executable (default: the launcher's name)
}
# Set by the shim per rank; everything else the driver delivers through the launcher.
RANK_SPECIFIC = ("RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "WORLD_SIZE", "ENVMATRIX_NODE",
                 "ENVMATRIX_DEVICE", "NCCL_HOSTID")
# ----------------------------------------------------------------------------- driver side (pure)


@dataclass(frozen=True)
class Layout:
    hosts: tuple[str, ...]  # hosts used, one per node; () when every rank runs on this host
    emulated: bool  # all ranks on one host; nodes told apart by NCCL_HOSTID
    master: str


def shim_argv(python: str, probe_argv: Sequence[str]) -> tuple[str, ...]:
    # -W: runpy warns that the package (which registers the launchers) already imported this module.
    return (python, "-W", "ignore::RuntimeWarning:runpy", "-m", SHIM_MODULE, "--", *probe_argv)


def signal_exit(outcome: ProcessOutcome) -> ProcessOutcome:
    """mpirun/srun report a rank killed by signal N as exit code 128+N: map it back to the signal."""
    code = outcome.exit_code
    if code is None or outcome.killed_by or outcome.signal or not 128 < code <= 128 + 64:
        return outcome
    try:
        name = signal.Signals(code - 128).name
    except ValueError:
        return outcome
    return ProcessOutcome(outcome.label, outcome.pid, None, name, None, outcome.ended_at, outcome.launch_error)


class ShimLauncher(Launcher):
    """A launcher that starts ranks through the shim; subclasses build the launcher's own argv."""

    reports_env = True  # ranks write rank{R}.env.json; a passed run without them is an env_mismatch
    option_defaults: Mapping[str, Any] = {}

    def __init__(self, options: Optional[Mapping[str, Any]] = None, hosts: Sequence[str] = (),
                 python: Optional[str] = None, as_root: Optional[bool] = None, allocation: Any = None) -> None:
        self._options = None if options is None else dict(options)
        self._hosts = tuple(hosts)
        self.python = python or sys.executable
        self.as_root = (os.geteuid() == 0) if as_root is None else as_root
        self.allocation = allocation

    # -- options and layout

    # Launchers that only work inside a batch allocation name it; configure_launcher checks up front.
    scheduler: Optional[str] = None
    scheduler_var = ""  # the variable the allocation sets (SLURM_JOB_ID, PBS_JOBID)
    scheduler_hint = ""  # "salloc/sbatch or pass ...": how to get one, or what to use instead

    @classmethod
    def needs_allocation(cls, options: Mapping[str, Any], hosts: Sequence[str]) -> bool:
        return cls.scheduler is not None

    def options(self, ctx: Optional[LaunchContext] = None) -> dict[str, Any]:
        from envmatrix import values

        raw = self._options or {}
        allowed = {**COMMON_OPTIONS, **self.option_defaults}
        unknown = sorted(set(raw) - set(allowed))
        if unknown:
            raise ConfigError(
                f"launcher_opts.{self.name}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], allowed)}; "
                f"allowed: {', '.join(sorted(allowed))}"
            )
        opts = {**allowed, **raw}
        for key in ("no_export", "extra_args"):
            value = opts[key]
            if value is not None and not isinstance(value, (str, list, tuple)):
                raise ConfigError(f"launcher_opts.{self.name}.{key}: {value!r} is not a list; allowed: a list such as "
                                  f"launcher_opts.{self.name}.{key}=[...] or one string")
            opts[key] = [value] if isinstance(value, str) else values.word_list(f"launcher_opts.{self.name}.{key}", value or [],
                                                                                  f"launcher_opts.{self.name}.{key}=[...]")
        if opts["emulate"] not in ("auto", True, False):
            raise ConfigError(f"launcher_opts.{self.name}.emulate: {opts['emulate']!r} not allowed; allowed: auto, true, false")
        if opts.get("hostfile"):  # the launcher starts in the run's directory: a relative path would name nothing there
            opts["hostfile"] = os.path.abspath(str(opts["hostfile"]))
        return opts

    def placement(self, opts: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[tuple[str, ...], bool, Any]:
        """(hosts given, whether nodes are emulated on one host, the allocation or None)."""
        from envmatrix.launchers.allocation import detect

        alloc = self.allocation if self.allocation is not None else detect(environ)
        hosts = tuple(opts["hosts"] or self._hosts or _hostfile_hosts(self.name, opts.get("hostfile"))
                      or (alloc.nodes if alloc else ()))
        emulate = len(set(hosts)) <= 1 if opts["emulate"] == "auto" else bool(opts["emulate"])
        return hosts, emulate, alloc

    def node_hosts(self, environ: Mapping[str, str]) -> tuple[str, ...]:
        hosts, emulate, _ = self.placement(self.options(), environ)
        return () if emulate else hosts

    def check_allocation(self, grids: Sequence[Any], backend: str, environ: Mapping[str, str]) -> None:
        from envmatrix.launchers.allocation import check_grids

        opts = self.options()
        _, emulate, alloc = self.placement(opts, environ)
        if alloc is not None and grids:
            check_grids(list(grids), backend, alloc, emulate=emulate)
        if not emulate and not (opts["hosts"] or self._hosts):
            _check_hostfile_slots(self.name, opts.get("hostfile"), grids)

    def layout(self, run: Run, ctx: LaunchContext, opts: Mapping[str, Any]) -> Layout:
        from envmatrix.launchers.allocation import check_grids

        hosts, emulate, alloc = self.placement(opts, ctx.inherited_env)
        if alloc is not None:
            check_grids([run.grid], run.backend, alloc, emulate=emulate)
        if emulate:
            return Layout(tuple(hosts[:1]), True, "127.0.0.1")
        check_nodes(run.grid, hosts)
        used = tuple(hosts[: run.grid.nodes])
        return Layout(used, False, used[0])

    # -- env

    def slots(self, run: Run, layout: Layout) -> tuple[RankSlot, ...]:
        grid, gpu = run.grid, run.backend == "nccl"
        return tuple(
            RankSlot(r, grid.node_of(r), grid.local_rank_of(r),
                     (r if layout.emulated else grid.local_rank_of(r)) if gpu else None,
                     (layout.hosts[0] if layout.hosts else socket.gethostname()) if layout.emulated else layout.hosts[grid.node_of(r)])
            for r in range(grid.world)
        )

    def rank_env(self, run: Run, slot: RankSlot, ctx: LaunchContext, layout: Layout) -> dict[str, str]:
        env = local_rank_vars(run, slot, ctx)
        env["MASTER_ADDR"] = layout.master
        env.pop("NCCL_HOSTID", None)
        if layout.emulated and run.grid.nodes > 1:
            env["NCCL_HOSTID"] = emulated_hostid(slot.node)
        env.pop("ENVMATRIX_DEVICE", None)
        if slot.device is not None:
            env["ENVMATRIX_DEVICE"] = str(slot.device)
        return env

    def plan_env(self, run: Run, ctx: LaunchContext, layout: Layout, opts: Mapping[str, Any]) -> tuple[list[dict[str, str]], dict[str, str]]:
        """(intended env per rank, variables the launcher must deliver, in a stable order)."""
        slots = self.slots(run, layout)
        defaults = LOOPBACK_DEFAULTS if layout.emulated else {}
        intended = [
            compose_rank_env(ctx.inherited_env, defaults, run.setup.atoms,
                             {**ctx.probe_env, **self.rank_env(run, s, ctx, layout)}, ctx.pins)
            for s in slots
        ]
        first = intended[0]
        names = [v for v in run.setup.variables if v in first]
        names += [v for v in defaults if v in first]
        names += list(ctx.pins) + list(ctx.probe_env)
        names += [k for k in self.rank_env(run, slots[0], ctx, layout) if k not in RANK_SPECIFIC]
        deliver = {n: first[n] for n in dict.fromkeys(names) if n not in RANK_SPECIFIC}
        unset = sorted(a.var for a in run.setup.atoms if a.op == UNSET and a.var not in first)
        checks = checked_names(run.setup.variables, ctx.pins, intended)
        deliver.update({
            "ENVMATRIX_LAUNCHER": self.name,
            "ENVMATRIX_PPN": str(run.grid.ppn),
            "ENVMATRIX_EMULATE": "1" if layout.emulated else "0",
            "ENVMATRIX_CHECK_VARS": ",".join(checks),
        })
        if unset:
            deliver["ENVMATRIX_UNSET"] = ",".join(unset)
        if run.backend == "nccl":
            deliver["ENVMATRIX_USE_GPU"] = "1"
        for name in opts["no_export"]:
            deliver.pop(name, None)
        return intended, deliver

    # -- plan

    def launcher_binary(self, opts: Mapping[str, Any]) -> str:
        return str(opts["binary"] or self.name)

    def missing_here(self) -> Optional[str]:
        # the driver starts the launcher on this host: a program not here failed every run as a launch_error
        import shutil

        opts = self.options()
        program = self.launcher_binary(opts)
        if shutil.which(program) is not None:
            return None
        key = f"launcher_opts.{self.name}.binary"
        if opts["binary"]:
            return f"{key}: {program!r} is not an executable file or a program on PATH; allowed: the {self.name} to start"
        return f"launcher={self.name}: {program!r} not found on PATH; allowed: a launcher installed here, or {key}=PATH"

    def rank_command(self, ctx: LaunchContext) -> tuple[str, ...]:
        return shim_argv(self.python, ctx.rank_argv)

    def launcher_argv(self, run: Run, ctx: LaunchContext, layout: Layout, deliver: Mapping[str, str],
                      opts: Mapping[str, Any]) -> tuple[str, ...]:
        raise NotImplementedError

    def processes(self, run: Run, ctx: LaunchContext, layout: Layout, deliver: Mapping[str, str],
                  opts: Mapping[str, Any]) -> tuple[ProcessSpec, ...]:
        """One launcher process with the inherited env only (mpirun, mpiexec, srun)."""
        argv = self.launcher_argv(run, ctx, layout, deliver, opts)
        return (ProcessSpec(argv=argv, env=dict(ctx.inherited_env), log_path=os.path.join(ctx.workdir, f"{self.name}.log"),
                            label=self.name, cwd=ctx.workdir),)

    def process_of_rank(self, run: Run, n_processes: int) -> tuple[int, ...]:
        return tuple(0 for _ in range(run.grid.world))

    def build(self, run: Run, ctx: LaunchContext) -> LaunchPlan:
        opts = self.options(ctx)
        layout = self.layout(run, ctx, opts)
        intended, deliver = self.plan_env(run, ctx, layout, opts)
        procs = self.processes(run, ctx, layout, deliver, opts)
        owner = self.process_of_rank(run, len(procs))
        logs = tuple((os.path.join(ctx.workdir, f"rank{r}.log"), procs[owner[r]].log_path) for r in range(run.grid.world))
        return LaunchPlan(procs, self.slots(run, layout), tuple(intended), process_of_rank=owner, rank_logs=logs)

    def map_outcome(self, outcome: ProcessOutcome) -> ProcessOutcome:
        return signal_exit(outcome)

    def rank_exits(self, output: str) -> list[RankExit]:
        """The shims' own word first (every rank whose probe ended by itself, exit 0 too, in the order said), then
        the launcher's account (:meth:`launcher_exits`) of ranks whose shim said nothing (killed with its probe)."""
        return shim_exits(output, self.name) + self.launcher_exits(output)

    def launcher_exits(self, output: str) -> list[RankExit]:
        """The ranks the launcher's own output says failed, first observed first; [] when it names none."""
        return []


# ----------------------------------------------------------------------------- rank side


def derive_rank_env(env: Mapping[str, str]) -> tuple[dict[str, str], int]:
    """(the env the probe runs with, rank) from the launcher's env; pure. Raises ValueError without identity."""
    launcher = env.get("ENVMATRIX_LAUNCHER")
    ident = launcher_identity(env, launcher)
    if ident is None:
        raise ValueError(f"no rank variables ({rank_var_names()}) set by the launcher")
    out = dict(env)
    ppn = int(env.get("ENVMATRIX_PPN") or ident.local_size or 1)
    emulated = env.get("ENVMATRIX_EMULATE") == "1"
    rank, world = ident.rank, ident.world
    node = rank // ppn
    local = rank % ppn if emulated else ident.local_rank
    nnodes = max(1, world // ppn)
    out.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local), LOCAL_WORLD_SIZE=str(ppn),
               GROUP_RANK=str(node), ENVMATRIX_NODE=str(node), ENVMATRIX_NNODES=str(nnodes))
    if emulated and nnodes > 1:
        out["NCCL_HOSTID"] = emulated_hostid(node)
    if env.get("ENVMATRIX_USE_GPU") == "1":
        out["ENVMATRIX_DEVICE"] = str(rank if emulated else local)
    if not out.get("MASTER_ADDR"):
        from envmatrix.launchers.allocation import expand_nodelist

        hosts = expand_nodelist(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "")
        out["MASTER_ADDR"] = hosts[0] if hosts else "127.0.0.1"
    out.setdefault("MASTER_PORT", "29500")
    for name in filter(None, (env.get("ENVMATRIX_UNSET") or "").split(",")):
        out.pop(name, None)
    out["ENVMATRIX_SHIM_IDENTITY"] = json.dumps({"family": ident.family, **ident.source}, sort_keys=True)
    return out, rank


def env_report(env: Mapping[str, str], rank: int) -> dict[str, Any]:
    checked = [n for n in (env.get("ENVMATRIX_CHECK_VARS") or "").split(",") if n]
    seen = echoed_env(env, checked)
    return {"rank": rank, "pid": os.getpid(), "host": os.uname().nodename, "checked": checked, "env": seen,
            "sha256": env_digest(seen)}


def _write_json(path: str, data: Mapping[str, Any]) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(data, fh, sort_keys=True)
    os.replace(tmp, path)


def _pdeathsig(sig: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, sig, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _supervise(child: int, strays: tuple[int, list[frozenset[bytes]]] = (0, []), rank: Optional[int] = None) -> int:
    """Wait for the probe; if the launcher goes away or signals us, kill the probe's whole group, and then what the
    probe left outside it (``strays``: since when, which environment: processes.kill_strays)."""

    stopped = []

    def stop(signum: int, _frame: Any) -> None:
        stopped.append(signum)
        try:
            os.killpg(child, signal.SIGKILL)
        except OSError:
            pass

    def forward(signum: int, _frame: Any) -> None:
        # said in the launcher's log: on a box where stacks do not come back, shows whether the launcher passed it on
        os.write(2, f"{shim_stack_request_line(signum, child)}\n".encode())
        try:
            os.kill(child, signum)  # the probe's stack-dump request (execution.hang), the probe only
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    signal.signal(signal.SIGUSR1, forward)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    try:
        os.killpg(child, signal.SIGKILL)  # grandchildren the probe left behind
    except OSError:
        pass
    # daemons it left in sessions of their own: on another node the driver's own sweep of this host cannot reach them
    kill_strays(*strays)
    if not stopped and rank is not None:
        # in the launcher's output, where the driver reads it even when it later kills the launcher at the timeout:
        # which ranks had ended by then, and how (launchers.rank_exits.shim)
        how = signal_name(os.WTERMSIG(status)) if os.WIFSIGNALED(status) else None
        line = shim_exit_line(rank, os.uname().nodename, None if how else os.WEXITSTATUS(status), how)
        try:
            os.write(2, f"{line}\n".encode())
        except OSError:
            pass
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # no handler can be set for these (OSError: exit 1)
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)  # die the same way, so the launcher sees the signal
        return 128 + sig
    return os.WEXITSTATUS(status)


def _hostfile_hosts(launcher: str, hostfile: Any) -> tuple[str, ...]:
    """The hosts a ``launcher_opts.<launcher>.hostfile`` names (they are the nodes when no ``hosts`` are given)."""
    return tuple(host for host, _ in _hostfile_entries(launcher, hostfile))


def _check_hostfile_slots(launcher: str, hostfile: Any, grids: Sequence[Any]) -> None:
    """PlanError (exit 2) for a grid whose ppn exceeds a used host's ``slots=``: ``--map-by ppr:P:node`` is
    refused there only at launch ('not enough slots'), as a launcher_error after the run dir is made."""
    from envmatrix.errors import PlanError

    entries = _hostfile_entries(launcher, hostfile)
    for grid in grids:
        for host, slots in entries[:grid.nodes]:
            if slots is not None and grid.ppn > slots:
                fits = min(s for _, s in entries[:grid.nodes] if s is not None)
                raise PlanError(f"grids: {grid.label} puts {grid.ppn} ranks on {host} but launcher_opts.{launcher}.hostfile "
                                f"{hostfile} gives it slots={slots}; allowed: grids with ppn <= {fits} on {grid.nodes} nodes")


def _hostfile_entries(launcher: str, hostfile: Any) -> list[tuple[str, Any]]:
    from envmatrix.planning.hostlist import parse_host_list
    from envmatrix.values import read_utf8

    if not hostfile:
        return []
    # the one capped reader: a hostfile that is /dev/zero (or gigabytes) was read until memory ran out
    text = read_utf8(str(hostfile), f"launcher_opts.{launcher}.hostfile {hostfile}", "the hostfile")
    return parse_host_list(text, str(hostfile))


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        print("envmatrix shim: usage: python -m envmatrix.launchers.shim -- PROBE ARGV...", file=sys.stderr)
        return 2
    try:
        env, rank = derive_rank_env(os.environ)
    except ValueError as exc:
        print(f"envmatrix shim: {exc}", file=sys.stderr)
        return 2
    result_dir = env.get(RESULT_DIR_VAR) or "."
    parent = os.getppid()
    _pdeathsig(signal.SIGTERM)  # launcher gone (mpirun puts ranks in their own groups): clean up below
    if os.getppid() != parent:
        return 137
    try:
        _write_json(env_report_path(result_dir, rank), env_report(env, rank))
        log = os.open(os.path.join(result_dir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        print(f"envmatrix shim: rank {rank}: cannot write to ENVMATRIX_RESULT_DIR={result_dir}: {exc}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    # A stack-dump request that comes before the forwarder is installed must not kill the shim.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    # the probe: its own process group, so the shim can kill it with its children
    since = boot_ticks() - 1
    child = fork_exec_in_group(args, env, log, f"envmatrix shim: rank {rank}", default_signals=(signal.SIGUSR1,))
    os.close(log)
    # this rank's processes only: the other ranks on this host share the result directory, not the rank
    mine = frozenset({f"{RESULT_DIR_VAR}={result_dir}".encode(), f"RANK={rank}".encode()})
    return _supervise(child, (since, [mine]), rank)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
