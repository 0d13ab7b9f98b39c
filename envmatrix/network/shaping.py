"""Apply a condition to links and undo it: ``with shaped(links, condition) as proof: ...``.

What goes on a link is ``qdiscs``' tree (htb at the root, netem under it; an ifb for the receive side with
``ingress: true``, seed 000's setup). Before anything is installed ``checks.check_applicable`` refuses what must
not or cannot be done. Each link's tree is saved, the plan written to ``state`` before the first change, and on
the way out (normal end, an exception, Ctrl-C: the undo itself is not interrupted) the saved qdiscs and classes
are sent back to the kernel in their own bytes and the restored configuration is compared byte for byte.

GRO/GSO are left as they are: htb accounts bytes, so aggregated packets make the shaper burstier, not faster
(the rate tests measure transfers within 8% of S/R); pyroute2's ethtool cannot reach a namespace's links.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from typing import Iterable, Iterator, Optional, Sequence

from pyroute2.netlink.exceptions import NetlinkError

from envmatrix.execution.processes import deferred_interrupt
from envmatrix.network import netlink, qdiscs, state, tctree
from envmatrix.network.checks import check_applicable, kernel_support, privilege_problem
from envmatrix.network.conditions import Condition
from envmatrix.network.netlink import Link, as_link
from envmatrix.network.tctree import TcItem

__all__ = ["Link", "LinkProof", "ShapingProof", "as_link", "check_applicable", "dump", "kernel_support",
           "privilege_problem", "shaped", "undo_entry"]


@dataclass
class LinkProof:
    link: str
    original: str  # the link's tree before envmatrix touched it
    before: str = ""  # as installed, before the measured traffic
    after: str = ""  # at the end, statistics showing what went through the shaper
    restored: Optional[bool] = None  # the saved configuration came back byte for byte


@dataclass
class ShapingProof:
    """What was installed where, dumped as the kernel reported it: stored beside the figures."""

    condition: str
    value: str
    links: list[LinkProof] = field(default_factory=list)

    def text(self) -> str:
        parts = []
        for lp in self.links:
            parts.append(f"== {lp.link}\n-- before\n{lp.before}\n-- after\n{lp.after}")
        return f"condition {self.condition}: {self.value}\n" + "\n".join(parts)

    def to_json(self) -> dict:
        return asdict(self)

    def sent_bytes(self) -> dict[str, int]:
        """Bytes envmatrix's root qdisc passed on each link by the end (0 means the traffic went another way)."""
        found = {}
        for lp in self.links:
            match = re.search(r"^qdisc \S+ e1a[01]: root.*\n Sent (\d+) bytes", lp.after, re.M)
            found[lp.link] = int(match.group(1)) if match else 0
        return found


# -- install and undo


def _config(items: Sequence[TcItem]) -> list[str]:
    return sorted(f"{i.what} {i.config.hex()}" for i in items if i.what != "filter" and i.parent != qdiscs.INGRESS_HANDLE)


def _user_items(items: Sequence[TcItem]) -> list[TcItem]:
    """The egress qdiscs and classes someone configured (the kernel's default root has handle 0)."""
    roots = [i for i in items if i.what == "qdisc" and i.parent == netlink.TC_H_ROOT]
    if not roots or roots[0].handle == 0:
        return []
    return [i for i in items if i.what in ("qdisc", "class") and i.parent != qdiscs.INGRESS_HANDLE
            and not (i.what == "qdisc" and i.parent == netlink.TC_H_INGRESS)]


def _entry(link: Link, index: int, condition: Condition, saved: Sequence[TcItem], has_ingress: bool) -> dict:
    return {
        "netns": link.netns, "netns_id": netlink.namespace_id(link.netns), "ifname": link.ifname, "ifindex": index,
        "condition": condition.describe(),
        "root": qdiscs.ROOT_HANDLE if condition.rate_bps is not None else qdiscs.NETEM_HANDLE,
        "ingress": condition.ingress and not has_ingress,
        "ifb": qdiscs.ifb_name(index) if condition.ingress else None,
        "saved": [{"what": i.what, "kind": i.kind, "handle": i.handle, "parent": i.parent, "config": i.config.hex()}
                  for i in saved],
        "saved_config": _config(saved),
    }


def _install(link: Link, condition: Condition, key: str) -> tuple[dict, LinkProof]:
    with netlink.route(link.netns) as ipr:
        index = netlink.ifindex(ipr, link.netns, link.ifname)
        items = tctree.tc_tree(ipr, index)
        has_ingress = any(i.what == "qdisc" and i.parent == netlink.TC_H_INGRESS for i in items)
        saved = _user_items(items)
        entry = _entry(link, index, condition, saved, has_ingress)
        proof = LinkProof(str(link), tctree.render(items, with_stats=False))
        state.record(key, entry)  # before the first change: a kill -9 from here on is cleaned up by the next command
        try:
            if saved:
                netlink.delete_qdisc(ipr, index, netlink.TC_H_ROOT)
            qdiscs.install_tree(ipr, index, condition)
            if condition.ingress:
                ifb = entry["ifb"]
                ipr.link("add", ifname=ifb, kind="ifb")
                ifb_index = netlink.ifindex(ipr, link.netns, ifb)
                ipr.link("set", index=ifb_index, state="up")
                qdiscs.install_tree(ipr, ifb_index, condition)
                ipr.tc("add", "ingress", index=index)
                qdiscs.add_redirect(ipr, index, ifb_index)
        except BaseException as exc:
            undo_entry(entry)  # half-made: put the link back as it was before raising
            state.forget(key)
            if isinstance(exc, NetlinkError):
                raise netlink.NetlinkFailed(f"network condition {condition.name}: {link}: the kernel refused it "
                                            f"({os.strerror(exc.code)}, errno {exc.code}); nothing is left installed") from None
            raise
    proof.before = dump(link, entry)
    return entry, proof


def dump(link: Link, entry: Optional[dict] = None) -> str:
    """The link's tree as text with statistics (and its ifb's, when the entry shapes ingress)."""
    with netlink.route(link.netns) as ipr:
        text = tctree.render(tctree.tc_tree(ipr, netlink.ifindex(ipr, link.netns, link.ifname)))
        ifb = (entry or {}).get("ifb")
        if ifb and ipr.link_lookup(ifname=ifb):
            text += f"\n[{ifb}: ingress of {link.ifname}]\n" + tctree.render(tctree.tc_tree(ipr, netlink.ifindex(ipr, link.netns, ifb)))
    return text


def undo_entry(entry: dict) -> list[str]:
    """Remove what ``entry`` installed and put the saved tree back; what was removed, one phrase each.

    Safe to repeat and safe on a half-made installation: only envmatrix's own handles and ifb are removed, and a
    root someone else put on the link meanwhile is left alone (the saved tree then is not put back).
    """
    link = Link(entry["netns"], entry["ifname"])
    if not netlink.namespace_exists(link.netns) or netlink.namespace_id(link.netns) != entry.get("netns_id"):
        return []  # the namespace (and everything in it) is gone; one of the same name is another's
    removed = []
    with netlink.route(link.netns) as ipr:
        found = [i for i in ipr.link_lookup(ifname=link.ifname) if i == entry.get("ifindex")]
        if found:  # (a link of the same name with another index was made after ours went)
            index = found[0]
            root = _root(tctree.tc_tree(ipr, index))
            if root is not None and root.handle in (qdiscs.ROOT_HANDLE, qdiscs.NETEM_HANDLE):
                netlink.delete_qdisc(ipr, index, netlink.TC_H_ROOT)
                removed.append(f"{root.kind} on {link}")
            if entry.get("ingress") and netlink.delete_qdisc(ipr, index, netlink.TC_H_INGRESS):
                removed.append(f"ingress redirect on {link}")
            saved = [TcItem(s["what"], s["kind"], s["handle"], s["parent"], bytes.fromhex(s["config"]))
                     for s in entry.get("saved", [])]
            root = _root(tctree.tc_tree(ipr, index))
            if saved and (root is None or root.handle == 0):  # the kernel's default is back: the saved tree goes on
                tctree.restore_items(link.netns, saved)
                removed.append(f"restored {saved[0].kind} on {link}")
        ifb = entry.get("ifb")
        if ifb and ipr.link_lookup(ifname=ifb):
            ipr.link("del", index=ipr.link_lookup(ifname=ifb)[0])
            removed.append(f"ifb {ifb}" + (f" (namespace {link.netns})" if link.netns else ""))
    return removed


def _root(items: Sequence[TcItem]) -> Optional[TcItem]:
    return next((i for i in items if i.what == "qdisc" and i.parent == netlink.TC_H_ROOT), None)


def restored_exactly(entry: dict) -> bool:
    """The link's qdiscs and classes are the saved ones, byte for byte (true when the link itself is gone)."""
    link = Link(entry["netns"], entry["ifname"])
    if not netlink.namespace_exists(link.netns):
        return True
    with netlink.route(link.netns) as ipr:
        found = ipr.link_lookup(ifname=link.ifname)
        return not found or _config(_user_items(tctree.tc_tree(ipr, found[0]))) == entry["saved_config"]


@contextlib.contextmanager
def shaped(links: Iterable, condition: Condition, allow_default_route: bool = False) -> Iterator[ShapingProof]:
    """Shape ``links`` with ``condition`` for the block; everything is restored on the way out, Ctrl-C included.

    The unshaped condition touches nothing (and needs no privileges). Raises PlanError up front (nothing
    installed) for what ``check_applicable`` refuses.
    """
    links = [as_link(link) for link in links]
    proof = ShapingProof(condition.name, condition.describe())
    if not condition.shaped:
        yield proof
        return
    check_applicable(links, condition, allow_default_route)
    installed: list[tuple[str, dict, LinkProof]] = []
    try:
        for n, link in enumerate(links):
            key = f"{id(proof):x}-{n}"
            entry, link_proof = _install(link, condition, key)
            installed.append((key, entry, link_proof))
            proof.links.append(link_proof)
        yield proof
    finally:
        failures = []
        with deferred_interrupt():  # a Ctrl-C during the undo waits for it: a half-undone link helps nobody
            for key, entry, link_proof in reversed(installed):
                link = Link(entry["netns"], entry["ifname"])
                try:
                    if netlink.link_present(link):
                        link_proof.after = dump(link, entry)
                    undo_entry(entry)
                    link_proof.restored = restored_exactly(entry)
                    if not link_proof.restored:
                        failures.append(f"{link}: the saved qdisc did not come back byte for byte")
                except (netlink.NetlinkFailed, NetlinkError, OSError) as exc:
                    failures.append(f"{link}: {exc}")
                    continue  # left in the state file: the next command tries again
                state.forget(key)
        if failures and sys.exc_info()[0] is None:  # never hide the exception that is unwinding
            raise netlink.NetlinkFailed(f"network condition {condition.name}: undo incomplete: {'; '.join(failures)}")
