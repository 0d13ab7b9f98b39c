"""Netlink through pyroute2: named namespaces, a route socket per namespace, link lookups, and raw rtnetlink
requests (a saved tree is sent back in the kernel's own bytes). Works without ``ip``/``tc`` binaries."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import struct
from dataclasses import dataclass
from typing import Iterator, Optional

from pyroute2 import IPRoute
from pyroute2 import config as pyroute2_config
from pyroute2 import netns as pyroute2_netns
from pyroute2.netlink.exceptions import NetlinkError

from envmatrix.errors import EnvmatrixError

# A socket in a named namespace comes from a forked child that pyroute2 stops with SIGTERM once the socket is
# handed over. With the driver's handler (the command line's raises KeyboardInterrupt) that child unwound the
# driver's stack copy: its cleanups ran there (shaping undone, namespaces removed under the running parent) and it
# printed 'stopped by SIGTERM'. The child takes the default action instead.
pyroute2_config.disable_mp_signal = True
# pyroute2 waits 2 s for such a child (and for the one that creates a namespace); on a loaded 2-core CI box the
# child answered later and namespace creation raised TimeoutError, failing a cluster that was fine
pyroute2_config.default_communicate_timeout = 30

NETNS_DIR = "/run/netns"  # where `ip netns` and pyroute2 keep named namespaces (/var/run is a link to /run)

# rtnetlink message types and flags (linux/rtnetlink.h, linux/netlink.h)
RTM_NEWQDISC, RTM_NEWTCLASS, RTM_NEWTFILTER = 36, 40, 44
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
NLMSG_ERROR = 2
TC_H_ROOT, TC_H_INGRESS = 0xFFFFFFFF, 0xFFFFFFF1
_NLMSG_HDR = struct.Struct("=IHHII")


class NetlinkFailed(EnvmatrixError):
    """The kernel refused a netlink request; the message says which and why."""


def netns_path(name: str) -> str:
    return os.path.join(NETNS_DIR, name)


def namespace_exists(name: Optional[str]) -> bool:
    return name is None or os.path.exists(netns_path(name))


def namespace_id(name: Optional[str]) -> Optional[int]:
    """The namespace's inode: a namespace deleted and made again under the same name has another one."""
    try:
        return os.stat(netns_path(name) if name is not None else "/proc/self/ns/net").st_ino
    except OSError:
        return None


def namespaces() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def create_namespace(name: str) -> None:
    """A named namespace, as ``ip netns add`` makes it (a bind mount under /run/netns)."""
    if namespace_exists(name):
        raise NetlinkFailed(f"network namespace {name} exists already")
    pyroute2_netns.create(name)


def remove_namespace(name: str) -> None:
    if os.path.exists(netns_path(name)):
        try:
            pyroute2_netns.remove(name)
        except FileNotFoundError:  # removed meanwhile by another thread or process
            pass


@contextlib.contextmanager
def route(netns: Optional[str]) -> Iterator[IPRoute]:
    """An rtnetlink socket in ``netns`` (None: this process's namespace); never creates the namespace."""
    if netns is not None and not namespace_exists(netns):
        raise NetlinkFailed(f"network namespace {netns} does not exist")
    ipr = IPRoute(netns=netns, flags=0) if netns is not None else IPRoute()
    try:
        yield ipr
    finally:
        ipr.close()


@contextlib.contextmanager
def scratch_namespace(name: str) -> Iterator[IPRoute]:
    """An rtnetlink socket in a fresh namespace for trying things; the name goes as soon as the socket holds the
    namespace, so it vanishes with the socket, a kill -9 included."""
    remove_namespace(name)  # a dead process's of the same name
    create_namespace(name)
    try:
        ipr = IPRoute(netns=name, flags=0)
        ipr.get_links()  # the socket is made and bound inside the namespace before the name goes
    finally:
        remove_namespace(name)
    try:
        yield ipr
    finally:
        ipr.close()


def where(netns: Optional[str], ifname: str) -> str:
    return f"{ifname} (namespace {netns})" if netns else ifname


@dataclass(frozen=True)
class Link:
    """An interface, in a named network namespace or (None) in this process's."""

    netns: Optional[str]
    ifname: str

    def __str__(self) -> str:
        return where(self.netns, self.ifname)


def as_link(link) -> Link:
    """A Link, or a (netns, ifname) pair as one."""
    return link if isinstance(link, Link) else Link(link[0], link[1])


def link_present(link: Link) -> bool:
    if not namespace_exists(link.netns):
        return False
    with route(link.netns) as ipr:
        return bool(ipr.link_lookup(ifname=link.ifname))


def ifindex(ipr: IPRoute, netns: Optional[str], ifname: str) -> int:
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        raise NetlinkFailed(f"interface {where(netns, ifname)} does not exist")
    return found[0]


def is_loopback(ipr: IPRoute, index: int) -> bool:
    link = ipr.get_links(index)[0]
    return bool(link["flags"] & 0x8) or link.get_attr("IFLA_IFNAME") == "lo"  # IFF_LOOPBACK


def default_route_interfaces(ipr: IPRoute) -> set[int]:
    """Indexes of the links a default route (IPv4 or IPv6, any table) leaves through."""
    found = set()
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            routes = ipr.get_routes(family=family, table=254) + ipr.get_routes(family=family)
        except NetlinkError:
            continue
        for r in routes:
            if r["dst_len"] != 0 or r.get_attr("RTA_DST"):
                continue
            if r.get_attr("RTA_OIF"):
                found.add(r.get_attr("RTA_OIF"))
            for hop in r.get_attr("RTA_MULTIPATH") or []:
                found.add(hop["oif"])
    return found


# -- replaying saved configuration verbatim


def _raw_socket(netns: Optional[str]) -> socket.socket:
    if netns is None:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # NETLINK_ROUTE
    else:
        sock = pyroute2_netns.create_socket(netns, socket.AF_NETLINK, socket.SOCK_RAW, 0, flags=0)
    sock.bind((0, 0))
    return sock


def send_raw(netns: Optional[str], items: list[tuple[int, int, bytes]]) -> None:
    """Send (message type, flags, payload) requests in order, each acknowledged before the next."""
    with contextlib.closing(_raw_socket(netns)) as sock:
        for seq, (msg_type, flags, payload) in enumerate(items, start=1):
            header = _NLMSG_HDR.pack(_NLMSG_HDR.size + len(payload), msg_type, NLM_F_REQUEST | NLM_F_ACK | flags, seq, 0)
            sock.send(header + payload)
            while True:
                reply = sock.recv(65536)
                length, rtype, _, rseq, _ = _NLMSG_HDR.unpack_from(reply, 0)
                if rtype == NLMSG_ERROR and rseq == seq:
                    code = -struct.unpack_from("=i", reply, _NLMSG_HDR.size)[0]
                    if code:
                        raise NetlinkFailed(f"netlink request {msg_type} refused: {os.strerror(code)} (errno {code})")
                    break


def delete_qdisc(ipr: IPRoute, index: int, parent: int) -> bool:
    """Delete the qdisc at ``parent`` (root or ingress); False when there was none to delete."""
    try:
        ipr.tc("del", index=index, parent=parent) if parent != TC_H_INGRESS else ipr.tc("del", "ingress", index=index)
    except NetlinkError as exc:
        if exc.code in (errno.ENOENT, errno.EINVAL):
            return False
        raise
    return True
