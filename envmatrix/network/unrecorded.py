"""envmatrix's qdiscs and ifbs that no state file accounts for (a cleared /run, a state root elsewhere): found by
their handles and names, and removed on request only (``envmatrix network reset --unrecorded``), because they may
be a live run's whose state this process cannot see."""

from __future__ import annotations

from typing import Iterable, Optional

from pyroute2.netlink.exceptions import NetlinkError

from envmatrix.network import netlink, qdiscs
from envmatrix.network.netlink import Link


def installed_anywhere(netns_names: Optional[Iterable[Optional[str]]] = None) -> list[tuple[Link, str]]:
    """Every link (this namespace and each named one, or those of ``netns_names``) carrying envmatrix's root
    handle or ifb, recorded or not."""
    found = []
    for netns in [None, *netlink.namespaces()] if netns_names is None else netns_names:
        try:
            with netlink.route(netns) as ipr:
                for link in ipr.get_links():
                    name = link.get_attr("IFLA_IFNAME")
                    if name.startswith(qdiscs.IFB_PREFIX):
                        found.append((Link(netns, name), "ifb"))
                        continue
                    for q in ipr.get_qdiscs(index=link["index"]):
                        if q["index"] == link["index"] and q["parent"] == netlink.TC_H_ROOT and q["handle"] in (qdiscs.ROOT_HANDLE, qdiscs.NETEM_HANDLE):
                            found.append((Link(netns, name), q.get_attr("TCA_KIND")))
        except (netlink.NetlinkFailed, NetlinkError, OSError):
            continue  # a namespace deleted meanwhile
    return found


def remove_unrecorded(skip: Iterable[Link] = (), netns_names: Optional[Iterable[Optional[str]]] = None) -> list[str]:
    """Remove envmatrix's qdiscs and ifbs that no state entry accounts for (the state file was lost)."""
    skip = set(skip)
    removed = []
    for link, kind in installed_anywhere(netns_names):
        if link in skip:
            continue
        with netlink.route(link.netns) as ipr:
            index = ipr.link_lookup(ifname=link.ifname)
            if not index:
                continue
            if kind == "ifb":
                ipr.link("del", index=index[0])
                removed.append(f"ifb {link}")
                shaped_index = int(link.ifname[len(qdiscs.IFB_PREFIX):] or 0)  # _ifb_name: the shaped link's index
                if shaped_index and netlink.delete_qdisc(ipr, shaped_index, netlink.TC_H_INGRESS):
                    removed.append(f"ingress redirect on link {shaped_index}" + (f" (namespace {link.netns})" if link.netns else ""))
            elif netlink.delete_qdisc(ipr, index[0], netlink.TC_H_ROOT):
                removed.append(f"{kind} on {link} (unrecorded: what was there before is unknown)")
    return removed
