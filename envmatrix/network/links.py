"""Link plumbing for emulated hosts through netlink: a bridge, a veth per host with its far end in the host's
namespace, addresses, link state and blackhole routes. ``envmatrix.cluster`` builds its hosts with these; the
netlink calls stay in this package (the import contract says only envmatrix.network imports pyroute2).
"""

from __future__ import annotations

import errno
from typing import Optional

from pyroute2.netlink.exceptions import NetlinkError

from envmatrix.network import netlink
from envmatrix.network.netlink import NetlinkFailed, create_namespace, namespace_exists, namespaces, remove_namespace

__all__ = ["NetlinkFailed", "create_namespace", "namespace_exists", "namespaces", "remove_namespace", "make_bridge",
           "make_host_link", "set_link_state", "add_blackhole", "delete_link", "link_exists", "ipv4_prefixes_in_use"]


def _failed(what: str, exc: NetlinkError) -> NetlinkFailed:
    return NetlinkFailed(f"{what}: {exc.args[1] if len(exc.args) > 1 else exc} (errno {exc.code})")


def make_bridge(name: str, address: str, prefixlen: int) -> None:
    with netlink.route(None) as ipr:
        try:
            ipr.link("add", ifname=name, kind="bridge")
            index = netlink.ifindex(ipr, None, name)
            ipr.addr("add", index=index, address=address, prefixlen=prefixlen)
            ipr.link("set", index=index, state="up")
        except NetlinkError as exc:
            raise _failed(f"bridge {name}", exc) from None


def make_host_link(netns: str, root_ifname: str, bridge: str, address: str, prefixlen: int, ifname: str = "eth0") -> None:
    """A veth whose root end joins ``bridge`` and whose other end is ``ifname`` in ``netns`` with ``address``."""
    with netlink.route(None) as ipr:
        try:
            ipr.link("add", ifname=root_ifname, kind="veth", peer={"ifname": ifname, "net_ns_fd": netns})
            index = netlink.ifindex(ipr, None, root_ifname)
            ipr.link("set", index=index, master=netlink.ifindex(ipr, None, bridge))
            ipr.link("set", index=index, state="up")
        except NetlinkError as exc:
            raise _failed(f"veth {root_ifname}", exc) from None
    with netlink.route(netns) as ns:
        try:
            index = netlink.ifindex(ns, netns, ifname)
            ns.addr("add", index=index, address=address, prefixlen=prefixlen)
            ns.link("set", index=index, state="up")
            ns.link("set", index=netlink.ifindex(ns, netns, "lo"), state="up")
        except NetlinkError as exc:
            raise _failed(f"{ifname} in {netns}", exc) from None


def set_link_state(netns: Optional[str], ifname: str, up: bool) -> None:
    with netlink.route(netns) as ipr:
        ipr.link("set", index=netlink.ifindex(ipr, netns, ifname), state="up" if up else "down")


def add_blackhole(netns: str, destination: str) -> None:
    with netlink.route(netns) as ipr:
        ipr.route("add", dst=destination, dst_len=32, type="blackhole")


def link_exists(netns: Optional[str], ifname: str) -> bool:
    return netlink.link_present(netlink.Link(netns, ifname))


def delete_link(netns: Optional[str], ifname: str) -> bool:
    """Delete the link (a veth takes its peer with it); False when it was not there."""
    if not namespace_exists(netns):
        return False
    with netlink.route(netns) as ipr:
        found = ipr.link_lookup(ifname=ifname)
        if not found:
            return False
        try:
            ipr.link("del", index=found[0])
        except NetlinkError as exc:
            if exc.code == errno.ENODEV:
                return False
            raise
    return True


def ipv4_prefixes_in_use() -> set[str]:
    """The first three octets of every IPv4 address in this namespace (to pick a free /24)."""
    with netlink.route(None) as ipr:
        return {a.get_attr("IFA_ADDRESS").rsplit(".", 1)[0] for a in ipr.get_addr(family=2) if a.get_attr("IFA_ADDRESS")}
