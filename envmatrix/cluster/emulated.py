"""N emulated hosts on one machine: network namespaces on a private bridge, reached by a real mpirun.

Each host ``nodeI`` is a network namespace ``emx<tag>h<I>`` whose ``eth0`` is one end of a veth; the other end
(``emx<tag>v<I>``) sits on the bridge ``emx<tag>br`` with the address 10.231.X.1/24 (a /24 this cluster picks
and owns). Each host has its own /etc/hosts (/etc/netns/NS/hosts, naming every host) and, when a command is run
through ``argv_in``, its own hostname. OpenMPI's ``plm_rsh_agent`` is a small script mapping a host name to its
namespace, so ``mpirun --host node0:1,node1:1`` starts one orted per namespace exactly as ssh would on real nodes.

Faults per host, all real kernel state: ``link_down`` (its daemon cannot connect back), ``cut_pair`` (blackhole
routes: each of the two works, the pair does not), ``rate_limit`` (a network condition on both ends of its link,
through envmatrix.network.shaping), ``hang`` (SIGSTOP its rank processes once they start).

Everything is built through netlink (pyroute2) and the entry point of envmatrix.execution.netns, so the GPU box
without ``ip``/``tc`` works too. ``down`` kills what runs in the namespaces, deletes them, the veths, the bridge
and the files, and reports anything that survived.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shlex
import shutil
import signal
import stat
import threading
import time
from pathlib import Path
from typing import Optional

from envmatrix.cluster import registry
from envmatrix.cluster.registry import ClusterRecord
from envmatrix.errors import ConfigError, PlanError
from envmatrix.execution import netns as netns_exec
from envmatrix.execution.processes import deferred_interrupt
from envmatrix.network import links, shaping
from envmatrix.network.conditions import parse_condition
from envmatrix.network.shaping import Link

PREFIX = "emx"  # every namespace, bridge and veth of a cluster starts with it (names stay within IFNAMSIZ)
SUBNET_BASE = "10.231"
MAX_HOSTS = 200
HOST_IFNAME = "eth0"
RANK_MARKER = "envmatrix.rank."  # rank processes' command lines (the probe module the shim starts)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")


def unavailable_reason() -> Optional[str]:
    """Why emulated hosts cannot be made here (not root, namespaces not permitted), or None."""
    if os.geteuid() != 0:
        return "emulated hosts need root (network namespaces, veth, bridge)"
    probe = f"{PREFIX}probe{os.getpid()}"
    try:
        links.create_namespace(probe)
    except (OSError, links.NetlinkFailed) as exc:
        return f"network namespaces are not permitted here: {exc}"
    links.remove_namespace(probe)
    return None


class EmulatedCluster:
    """A cluster's names and handles; make one with ``up`` or find one with ``attach``."""

    def __init__(self, record: ClusterRecord) -> None:
        self.record = record
        self.name = record.name
        self.tag = record.tag
        self.n = record.hosts
        self.hosts = [f"node{i}" for i in range(record.hosts)]
        self.subnet = record.subnet
        self.bridge = f"{PREFIX}{self.tag}br"
        self.gateway = f"{self.subnet}.1"
        self.addresses = {h: f"{self.subnet}.{10 + i}" for i, h in enumerate(self.hosts)}
        self.dir = registry.files_dir(self.tag)
        self.agent = self.dir / "agent.sh"
        self._hangers: list[threading.Thread] = []
        self._stop = threading.Event()
        self._shaping = contextlib.ExitStack()
        self._closed = False

    # -- names

    def _index(self, host: str) -> int:
        if host not in self.hosts:
            raise ConfigError(f"cluster {self.name}: no host {host!r}; hosts: {', '.join(self.hosts)}")
        return self.hosts.index(host)

    def ns(self, host: str) -> str:
        return f"{PREFIX}{self.tag}h{self._index(host)}"

    def veth(self, host: str) -> str:
        """The root namespace's end of the host's link (on the bridge)."""
        return f"{PREFIX}{self.tag}v{self._index(host)}"

    def host_link(self, host: str) -> Link:
        """The host's own interface (``eth0`` in its namespace): where its egress is shaped."""
        return Link(self.ns(host), HOST_IFNAME)

    def links_of(self, host: str) -> list[Link]:
        """Both ends of the host's link: its eth0 (what it sends) and the bridge port (what it receives)."""
        return [self.host_link(host), Link(None, self.veth(host))]

    # -- what a launcher or a config needs

    def argv_in(self, host: str, argv: list[str]) -> list[str]:
        """``argv`` run on ``host`` (its namespace and hostname); start it through envmatrix.execution."""
        return netns_exec.netns_argv(self.ns(host), argv, hostname=host)

    def mpirun_args(self) -> list[str]:
        """mpirun options that reach the hosts through the agent.

        Nothing else on purpose: with plm_rsh_no_tree_spawn or oob_tcp_if_include a daemon whose link is
        down retries its connect until the run's timeout, instead of failing in seconds as on real nodes.
        ``plm rsh`` is named because an environment may pin another launch module: the lent GPU box sets
        OMPI_MCA_plm=isolated, which keeps every daemon on this host ("All nodes ... are already filled").
        """
        return ["--mca", "plm", "rsh", "--mca", "plm_rsh_agent", str(self.agent)]

    def launcher_opts(self) -> dict:
        return {"mpirun": {"extra_args": self.mpirun_args()}}

    def conf(self, **fields) -> dict:
        """A config dict (gloo, mpirun, these hosts); ``fields`` override or add keys."""
        base = {"name": f"nscluster{self.tag}", "backend": "gloo", "launcher": "mpirun", "hosts": list(self.hosts),
                "launcher_opts": self.launcher_opts(), "setups": {"base": {}}, "probe": {"timeout_s": 60}}
        base.update(fields)
        return base

    def hostfile_text(self, slots: int = 1) -> str:
        return "".join(f"{h} slots={slots}\n" for h in self.hosts)

    def hostfile(self, path: Path, slots: int = 1) -> Path:
        path.write_text(self.hostfile_text(slots))
        return path

    def conf_snippet(self) -> str:
        """The YAML lines a config needs to run on this cluster."""
        extra = ", ".join(self.mpirun_args())
        return (f"launcher: mpirun\nhosts: [{', '.join(self.hosts)}]\n"
                f"launcher_opts: {{mpirun: {{extra_args: [{extra}]}}}}\n")

    # -- build

    def _build(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        # A Ctrl-C waits for the netlink call it would hit (a host is made in ~10 ms): raised inside pyroute2's
        # coroutines it left "Task was destroyed but it is pending!" and "Exception ignored" tracebacks on stderr
        # after the one-line "envmatrix: interrupted".
        with deferred_interrupt():
            links.make_bridge(self.bridge, self.gateway, 24)
        hosts_file = "127.0.0.1 localhost\n" + "".join(f"{a} {h}\n" for h, a in self.addresses.items())
        for host in self.hosts:
            ns = self.ns(host)
            with deferred_interrupt():
                links.create_namespace(ns)
                links.make_host_link(ns, self.veth(host), self.bridge, self.addresses[host], 24, HOST_IFNAME)
            etc = Path(netns_exec.ETC_NETNS_DIR) / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts_file)
        cases = "".join(f"  {h}) ns={self.ns(h)} ;;\n" for h in self.hosts)
        enter = " ".join(shlex.quote(w) for w in netns_exec.netns_argv("NS", ["X"])[:3])  # python -m ...netns_enter
        # ssh semantics: the remote command is the rest of argv joined by spaces, run by a shell.
        self.agent.write_text(
            "#!/bin/sh\n# plm_rsh_agent for an envmatrix emulated cluster: HOST CMD... -> CMD in HOST's namespace and hostname\n"
            'host=$1; shift\ncase "$host" in\n' + cases
            + '  *) echo "envmatrix cluster agent: unknown host $host" >&2; exit 255 ;;\nesac\n'
            f'exec {enter} "$ns" --hostname "$host" -- sh -c "$*"\n'
        )
        self.agent.chmod(self.agent.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    # -- faults

    def link_down(self, host: str) -> None:
        links.set_link_state(None, self.veth(host), up=False)

    def link_up(self, host: str) -> None:
        links.set_link_state(None, self.veth(host), up=True)

    def cut_pair(self, a: str, b: str) -> None:
        """Blackhole routes both ways: ``a`` and ``b`` each reach everyone else, but not each other."""
        links.add_blackhole(self.ns(a), self.addresses[b])
        links.add_blackhole(self.ns(b), self.addresses[a])

    def rate_limit(self, host: str, rate: str = "2mbit") -> shaping.ShapingProof:
        """The host's link limited to ``rate`` both ways (until ``down``), through network.shaping."""
        condition = parse_condition(f"rate_limit_{host}", {"rate": rate}, f"cluster {self.name}: rate_limit")
        return self._shaping.enter_context(shaping.shaped(self.links_of(host), condition))

    def hang(self, host: str, after_s: float = 0.0) -> None:
        """SIGSTOP every rank process that appears in ``host``'s namespace (``after_s`` after it appears)."""
        ns = self.ns(host)

        def watch() -> None:
            seen: dict[int, float] = {}
            while not self._stop.wait(0.05):
                for pid in netns_exec.pids_in_netns(ns):
                    try:
                        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                    except OSError:
                        continue
                    if RANK_MARKER.encode() not in cmd or b"envmatrix.launchers.shim" in cmd:
                        continue
                    first = seen.setdefault(pid, time.monotonic())
                    if time.monotonic() - first >= after_s:
                        try:
                            os.kill(pid, signal.SIGSTOP)
                        except ProcessLookupError:
                            pass

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        self._hangers.append(thread)

    # -- teardown

    def processes(self) -> list[int]:
        return [p for h in self.hosts for p in netns_exec.pids_in_netns(self.ns(h))]

    def down(self) -> list[str]:
        """Remove the cluster; what survived (empty when everything went)."""
        if self._closed:
            return []
        self._closed = True
        self._stop.set()
        for thread in self._hangers:
            thread.join(timeout=2)
        left: list[str] = []
        try:
            self._shaping.close()
        except Exception as exc:  # noqa: BLE001 - the namespaces go next anyway, taking their qdiscs
            left.append(f"shaping: {exc}")
        left += remove_cluster(self.record)
        return left

    def close(self) -> None:
        """``down``, raising if anything survived (the test fixture's contract)."""
        left = self.down()
        if left:
            raise AssertionError(f"cluster {self.name}: left behind: {', '.join(left)}")

    def __enter__(self) -> "EmulatedCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def remove_cluster(record: ClusterRecord) -> list[str]:
    """Delete a cluster's namespaces (killing what runs there), veths, bridge and files; what survived."""
    cluster = EmulatedCluster(record)
    left = []
    for host in cluster.hosts:
        ns = cluster.ns(host)
        left += [f"pid {p} in {ns}" for p in netns_exec.kill_netns_processes(ns)]
        links.delete_link(None, cluster.veth(host))  # takes eth0 in the namespace with it, now, not later
        links.remove_namespace(ns)
        shutil.rmtree(Path(netns_exec.ETC_NETNS_DIR) / ns, ignore_errors=True)
    links.delete_link(None, cluster.bridge)
    left += [f"namespace {ns}" for ns in links.namespaces() if ns.startswith(f"{PREFIX}{record.tag}h")]
    left += [f"link {name}" for name in (cluster.bridge, *map(cluster.veth, cluster.hosts)) if links.link_exists(None, name)]
    shutil.rmtree(cluster.dir, ignore_errors=True)
    registry.remove(record.tag)
    return left


def reap_stale() -> list[str]:
    """Remove clusters whose owner died; their names. Call with the registry locked."""
    gone = []
    for record in registry.all_records():
        if not record.owner_alive():
            remove_cluster(record)
            gone.append(record.name)
    return gone


def up(hosts: int, name: Optional[str] = None, persistent: bool = False) -> EmulatedCluster:
    """Build a cluster of ``hosts`` emulated hosts (``persistent``: it outlives this process, until ``down``)."""
    if not isinstance(hosts, int) or not 1 <= hosts <= MAX_HOSTS:
        raise ConfigError(f"cluster up: hosts={hosts!r} not allowed; allowed: 1..{MAX_HOSTS}")
    if name is not None and not _NAME.match(name):
        raise ConfigError(f"cluster up: --name {name!r} not allowed; use 1-32 letters, digits, _ and - (e.g. c16)")
    reason = unavailable_reason()
    if reason:
        raise PlanError(f"cluster up: {reason}")
    with registry.locked():
        reap_stale()
        records = registry.all_records()
        if name is not None and any(r.name == name for r in records):
            raise ConfigError(f"cluster up: a cluster named {name!r} exists already; pick another --name or "
                              f"run: envmatrix cluster down --name {name}")
        used = {r.tag for r in records}
        taken = links.ipv4_prefixes_in_use()
        choices = [t for t in range(256) if f"{t:02x}" not in used and f"{SUBNET_BASE}.{t}" not in taken
                   and not any(ns.startswith(f"{PREFIX}{t:02x}h") for ns in links.namespaces())]
        if not choices:
            raise PlanError(f"cluster up: no free {SUBNET_BASE}.X.0/24 subnet left; run: envmatrix cluster down --all")
        third = random.choice(choices)
        tag = f"{third:02x}"
        record = registry.new_record(name or f"c{tag}", tag, hosts, f"{SUBNET_BASE}.{third}", persistent)
        registry.write(record)  # before the first namespace: a kill from here on is cleaned up by reap_stale
    cluster = EmulatedCluster(record)
    try:
        cluster._build()
    except BaseException:
        cluster.down()
        raise
    return cluster


def attach(name: str) -> EmulatedCluster:
    for record in registry.all_records():
        if record.name == name:
            return EmulatedCluster(record)
    known = [r.name for r in registry.all_records()]
    raise ConfigError(f"cluster {name!r}: no such cluster; known: {', '.join(known) or 'none (envmatrix cluster up N)'}")


def clusters() -> list[EmulatedCluster]:
    return [EmulatedCluster(r) for r in registry.all_records()]


def down(name: Optional[str] = None, everything: bool = False) -> list[tuple[str, list[str]]]:
    """Remove the cluster ``name`` (or every cluster): (name, what survived) each."""
    with registry.locked():
        records = registry.all_records()
        if not everything:
            if name is None and not records:
                return []
            if name is None:
                if len(records) != 1:
                    raise ConfigError(f"cluster down: {len(records)} clusters exist "
                                      f"({', '.join(r.name for r in records) or 'none'}); give --name NAME or --all")
                name = records[0].name
            records = [r for r in records if r.name == name]
            if not records:
                attach(name)  # the one-line error naming the known clusters
        return [(r.name, remove_cluster(r)) for r in records]

