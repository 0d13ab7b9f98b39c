"""A Session: what every trial of one command shares (store, launcher, probe, pins, host, run directory)."""

from __future__ import annotations

import os
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Mapping, Optional

from envmatrix.launchers.base import HostSeat, Launcher
from envmatrix.paths import store_url
from envmatrix.planning.plan import ProbeSpec
from envmatrix.store.base import ResultStore


@dataclass
class Session:
    store: ResultStore
    run_dir: str
    launcher: Launcher  # configured (SweepInput.make_launcher); the engine asks it only through its declared hooks
    launcher_key: str  # the launcher's identity in run keys
    probe_spec: ProbeSpec
    backend: str
    environ: Mapping[str, str]  # what ranks inherit (SweepInput.probe_environment)
    pins: Mapping[str, str]
    gpus: int
    host: dict
    sweep_id: str = ""
    pool: Any = None  # a WarmPool for the local launcher; None: cold starts
    jobs: int | str = 1
    judge: Optional[Callable[[Any], None]] = None  # marks a result against the config's expectations before it is stored
    # shapes a run's links under its network condition (engine.network.Shaper); None: no network axis to apply
    shaper: Optional[Callable[..., Any]] = None
    # each emulated host's network namespace when the launcher asks for them (emulate_hosts: {namespaces: true})
    host_seats: tuple[HostSeat, ...] = ()
    _probe: Any = field(default=None, repr=False)

    @property
    def probe(self) -> Any:
        if self._probe is None:
            from envmatrix.probes import get_probe

            self._probe = get_probe(self.probe_spec.name)
        return self._probe

    def under(self, **changes: Any) -> "Session":
        """The same store, launcher, host and pool with other per-command fields (sweep id, probe spec)."""
        if "probe_spec" in changes:
            changes.setdefault("_probe", None)
        return replace(self, **changes)


def open_store_at(run_dir_or_file: str) -> ResultStore:
    """The run directory's result store (or a .sqlite file given as is): the one place a store is opened."""
    from envmatrix.store import open_store

    path = os.path.abspath(run_dir_or_file)
    url = f"sqlite:///{path}" if path.endswith((".sqlite", ".db")) else store_url(path)
    return open_store(url)


@contextmanager
def open_session(
    inp: Any,
    run_dir: str,
    pins: Mapping[str, str],
    gpus: int,
    *,
    probe_spec: Optional[ProbeSpec] = None,
    sweep_id: str = "",
    lock_for: Optional[str] = None,
    pool: Any = False,
    jobs: int | str = 1,
    launcher: Any = None,
    store: Optional[ResultStore] = None,
) -> Iterator[Session]:
    """Open the store of ``run_dir`` (under the exclusive lock when ``lock_for`` names the command line),
    read the host facts once, and start a warm pool when asked and the launcher is local. ``pool``:
    True/False, or a WarmPool the caller started early (used for a local launcher, closed by the caller).
    ``launcher``/``store``: the command's own, built and opened once (left open for the caller to close);
    by default ``inp.make_launcher()`` and the run directory's store."""
    from envmatrix.execution.hostinfo import host_facts

    os.makedirs(run_dir, exist_ok=True)
    host = host_facts()
    environ = inp.probe_environment(os.environ, host)
    launcher = inp.make_launcher() if launcher is None else launcher
    with ExitStack() as stack:
        if lock_for is not None:
            from envmatrix.store.lock import exclusive

            stack.enter_context(exclusive(os.path.join(run_dir, "results.sqlite"), lock_for))
        if store is None:
            store = stack.enter_context(open_store_at(run_dir))
        store.check_rows()  # a corrupt row is refused before anything is launched or written
        warm = None
        local = launcher.uses_warm_pool
        if not isinstance(pool, bool):  # a WarmPool the caller prestarted (and closes)
            if local:
                warm = pool
                warm.rebase(environ)  # servers started under other loader values are never chosen
            else:
                pool.close()  # prestarted for nothing: free the cores now
        elif pool and local:
            from envmatrix.execution.pool import WarmPool

            warm = WarmPool(environ)
            stack.callback(warm.close)
        seats = host_namespaces(stack, max((g.nodes for g in inp.grids), default=1)) if launcher.host_namespaces else ()
        yield Session(store=store, run_dir=run_dir, launcher=launcher, launcher_key=inp.launcher_key,
                      probe_spec=probe_spec or inp.probe, backend=inp.backend, environ=environ, pins=pins,
                      gpus=gpus, host=host, sweep_id=sweep_id, pool=warm, jobs=jobs, host_seats=seats)


def host_namespaces(stack: ExitStack, hosts: int) -> tuple[HostSeat, ...]:
    """A network namespace per emulated host on one bridge (envmatrix.cluster) for this session, taken down with
    it (and by the next command's reaper after a kill -9); each host's ranks start inside its namespace."""
    from envmatrix import cluster
    from envmatrix.execution.netns import netns_argv
    from envmatrix.planning.placement import emulated_hostname

    made = cluster.up(hosts)
    stack.callback(made.down)
    return tuple(HostSeat(emulated_hostname(i), tuple(netns_argv(made.ns(h), [], hostname=emulated_hostname(i))),
                          made.addresses[h], netns=made.ns(h)) for i, h in enumerate(made.hosts))
