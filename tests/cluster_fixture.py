"""A real multi-host test bed on one machine: N network namespaces on a bridge, reached by a real mpirun.

Each emulated host is a network namespace with its own veth link on a private bridge (an address in a
10.231.X.0/24 subnet this fixture picks and owns), its own /etc/hosts (``ip netns exec`` bind-mounts
/etc/netns/NS/hosts), and its own hostname (``unshare --uts``). OpenMPI's ``plm_rsh_agent`` is a small
script that maps a host name to its namespace, so ``mpirun --host node0:1,node1:1`` starts one orted per
namespace exactly as ssh would on real nodes, and gloo ranks talk over the veth links.

Faults per host, all real kernel state: ``link_down`` (the host's veth: its daemon cannot connect back),
``cut_pair`` (blackhole routes between two hosts: each works, the pair does not), ``rate_limit``
(``tc`` htb on both ends of the host's link: slow), ``hang`` (SIGSTOP the host's rank processes once they
start: peers block until the run's timeout).

Cleanup is guaranteed: ``close`` kills every process left in the namespaces, deletes them, the bridge and
the /etc/netns entries, and raises if anything survived. Clusters whose owning process died (a killed
pytest) are removed by the next one. Needs root and ``ip netns``; otherwise the fixture skips, saying why.
"""

from __future__ import annotations

import fcntl
import os
import random
import shutil
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator, Optional

import pytest

STATE_DIR = Path("/run/envmatrix-nscluster")
PREFIX = "emx"  # every namespace, bridge and veth this fixture creates starts with it (15-char IFNAMSIZ)
SUBNET_BASE = "10.231"
RANK_MARKER = "envmatrix.rank."  # rank processes' command lines (the probe module the shim starts)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _tc(*args: str) -> None:
    subprocess.run(["tc", *args], capture_output=True, text=True, check=True)


def unavailable_reason() -> Optional[str]:
    """Why a namespace cluster cannot run here, or None."""
    if os.geteuid() != 0:
        return "namespace cluster needs root (ip netns add, veth, bridge)"
    for tool in ("ip", "tc", "unshare", "mpirun"):
        if shutil.which(tool) is None:
            return f"namespace cluster needs {tool!r} on PATH (iproute2, util-linux, openmpi-bin)"
    probe = f"{PREFIX}probe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"network namespaces are not permitted here: ip netns add: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _pids_in(ns: str) -> list[int]:
    out = _ip("netns", "pids", ns, check=False).stdout.split()
    return [int(p) for p in out if p.isdigit()]


def _remove(tag: str, hosts: int) -> list[str]:
    """Delete cluster ``tag``'s namespaces (killing what runs there), bridge and files; what survived."""
    left = []
    for i in range(hosts):
        ns = f"{PREFIX}{tag}h{i}"
        for _ in range(50):
            pids = _pids_in(ns)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        left += [f"pid {p} in {ns}" for p in _pids_in(ns)]
        _ip("netns", "del", ns, check=False)
        shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
    _ip("link", "del", f"{PREFIX}{tag}br", check=False)  # takes the root ends of the veths with it
    namespaces = _ip("netns", "list", check=False).stdout
    left += [f"namespace {ln.split()[0]}" for ln in namespaces.splitlines() if ln.startswith(f"{PREFIX}{tag}h")]
    if _ip("link", "show", f"{PREFIX}{tag}br", check=False).returncode == 0:
        left.append(f"bridge {PREFIX}{tag}br")
    return left


def _reap_stale() -> None:
    """Clusters whose owner died (pytest killed): their state file names the owner pid and host count."""
    for path in STATE_DIR.glob("*.owner"):
        try:
            pid, hosts = (int(x) for x in path.read_text().split())
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
            continue
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        tag = path.stem
        _remove(tag, hosts)
        path.unlink(missing_ok=True)
        shutil.rmtree(STATE_DIR / tag, ignore_errors=True)


class NamespaceCluster:
    """``hosts`` emulated hosts named node0..node{N-1}; use as a context manager (or call close)."""

    def __init__(self, hosts: int) -> None:
        if not 1 <= hosts <= 200:
            raise ValueError(f"hosts: {hosts} not allowed; allowed: 1..200")
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self.n = hosts
        self.hosts = [f"node{i}" for i in range(hosts)]
        self._hangers: list[threading.Thread] = []
        self._stop = threading.Event()
        self._closed = False
        with open(STATE_DIR / "lock", "w") as lock:  # tag and subnet picked atomically among concurrent clusters
            fcntl.flock(lock, fcntl.LOCK_EX)
            _reap_stale()
            used = {p.stem for p in STATE_DIR.glob("*.owner")}
            taken = {ln.split()[3].rsplit(".", 2)[0] for ln in _ip("-4", "-o", "addr", check=False).stdout.splitlines() if " inet " in ln}
            choices = [t for t in range(256) if f"{t:02x}" not in used and f"{SUBNET_BASE}.{t}" not in taken]
            if not choices:
                raise RuntimeError("namespace cluster: no free 10.231.X.0/24 subnet left")
            third = random.choice(choices)
            self.tag = f"{third:02x}"
            (STATE_DIR / f"{self.tag}.owner").write_text(f"{os.getpid()} {hosts}")
        self.subnet = f"{SUBNET_BASE}.{third}"
        self.bridge = f"{PREFIX}{self.tag}br"
        self.addresses = {h: f"{self.subnet}.{10 + i}" for i, h in enumerate(self.hosts)}
        self.dir = STATE_DIR / self.tag
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # -- names

    def ns(self, host: str) -> str:
        return f"{PREFIX}{self.tag}h{self.hosts.index(host)}"

    def veth(self, host: str) -> str:
        return f"{PREFIX}{self.tag}v{self.hosts.index(host)}"

    # -- setup

    def _build(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        hosts_file = "127.0.0.1 localhost\n" + "".join(f"{a} {h}\n" for h, a in self.addresses.items())
        for host in self.hosts:
            ns, veth = self.ns(host), self.veth(host)
            _ip("netns", "add", ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "master", self.bridge, "up")
            _ip("-n", ns, "addr", "add", f"{self.addresses[host]}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            os.makedirs(f"/etc/netns/{ns}", exist_ok=True)
            Path(f"/etc/netns/{ns}/hosts").write_text(hosts_file)
        cases = "".join(f"  {h}) ns={self.ns(h)} ;;\n" for h in self.hosts)
        # ssh semantics: the remote command is the rest of argv joined by spaces, run by a shell.
        self.agent = self.dir / "agent.sh"
        self.agent.write_text(
            "#!/bin/sh\n# plm_rsh_agent for the namespace cluster: HOST CMD... -> CMD in HOST's namespace and hostname\n"
            'host=$1; shift\ncase "$host" in\n' + cases
            + '  *) echo "nscluster agent: unknown host $host" >&2; exit 255 ;;\nesac\n'
            'exec ip netns exec "$ns" unshare --uts sh -c "hostname $host; $*"\n'
        )
        self.agent.chmod(self.agent.stat().st_mode | stat.S_IXUSR)

    # -- what a config needs

    def mpirun_args(self) -> list[str]:
        """mpirun options that reach the hosts through the agent.

        Nothing else on purpose: with plm_rsh_no_tree_spawn or oob_tcp_if_include a daemon whose link is
        down retries its connect until the run's timeout, instead of failing in seconds as on real nodes.
        """
        return ["--mca", "plm_rsh_agent", str(self.agent)]

    def launcher_opts(self) -> dict:
        return {"mpirun": {"extra_args": self.mpirun_args()}}

    def conf(self, **fields) -> dict:
        """A config dict (gloo, mpirun, these hosts); ``fields`` override or add keys."""
        base = {"name": f"nscluster{self.tag}", "backend": "gloo", "launcher": "mpirun", "hosts": list(self.hosts),
                "launcher_opts": self.launcher_opts(), "setups": {"base": {}}, "probe": {"timeout_s": 60}}
        base.update(fields)
        return base

    def hostfile(self, path: Path, slots: int = 1) -> Path:
        path.write_text("".join(f"{h} slots={slots}\n" for h in self.hosts))
        return path

    # -- faults

    def link_down(self, host: str) -> None:
        _ip("link", "set", self.veth(host), "down")

    def link_up(self, host: str) -> None:
        _ip("link", "set", self.veth(host), "up")

    def cut_pair(self, a: str, b: str) -> None:
        """Blackhole routes both ways: ``a`` and ``b`` each reach everyone else, but not each other."""
        _ip("-n", self.ns(a), "route", "add", "blackhole", f"{self.addresses[b]}/32")
        _ip("-n", self.ns(b), "route", "add", "blackhole", f"{self.addresses[a]}/32")

    def rate_limit(self, host: str, rate: str = "2mbit") -> None:
        """htb on both ends of the host's link (netem is not in every kernel; htb is)."""
        for netns, dev in (((), self.veth(host)), (("-n", self.ns(host)), "eth0")):
            _tc(*netns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
            _tc(*netns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate", rate, "ceil", rate)

    def hang(self, host: str, after_s: float = 0.0) -> None:
        """SIGSTOP every rank process that appears in ``host``'s namespace (``after_s`` after it appears)."""
        ns = self.ns(host)

        def watch() -> None:
            seen: dict[int, float] = {}
            while not self._stop.wait(0.05):
                for pid in _pids_in(ns):
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
        return [p for h in self.hosts for p in _pids_in(self.ns(h))]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        for thread in self._hangers:
            thread.join(timeout=2)
        left = _remove(self.tag, self.n)
        shutil.rmtree(self.dir, ignore_errors=True)
        (STATE_DIR / f"{self.tag}.owner").unlink(missing_ok=True)
        if left:
            raise AssertionError(f"namespace cluster {self.tag}: left behind: {', '.join(left)}")

    def __enter__(self) -> "NamespaceCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@pytest.fixture
def ns_cluster() -> Iterator:
    """Factory: ``ns_cluster(4)`` -> a NamespaceCluster, closed (and checked clean) after the test."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    made: list[NamespaceCluster] = []

    def make(hosts: int) -> NamespaceCluster:
        cluster = NamespaceCluster(hosts)
        made.append(cluster)
        return cluster

    yield make
    errors = []
    for cluster in made:
        try:
            cluster.close()
        except AssertionError as exc:
            errors.append(str(exc))
    assert not errors, "; ".join(errors)
