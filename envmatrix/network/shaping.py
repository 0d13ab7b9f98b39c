"""Apply a condition to links and undo it: ``with shaped(links, condition) as proof: ...``.

Egress: htb at the root (one class, the default, at the condition's rate) with netem under it for delay,
jitter and loss (mininet's hierarchy); netem alone at the root when there is no rate. Ingress (``ingress:
true``): the link's received packets are redirected (ingress qdisc, a u32 filter with mirred) to an ifb device
that carries the same tree, so the receive side is shaped too (seed 000's setup). Handles are envmatrix's own
(``e1a0:``, ``e1a1:``), so what it installed is recognisable.

Safety, checked before anything is installed (``check_applicable``): root or CAP_NET_ADMIN; the kernel can do
what the condition needs (a throw-away namespace is tried once per process: many cloud kernels lack sch_netem);
never the loopback or a default-route interface unless asked; a link with tc filters under its root is refused
(they could not be put back exactly). Each link's tree is saved, the plan written to ``state`` before the first
change, and on the way out (normal end, an exception, Ctrl-C) the saved qdiscs and classes are sent back to the
kernel in their own bytes and the restored configuration is compared byte for byte with the saved one.

GRO/GSO are left as they are: htb accounts bytes, so aggregated packets make the shaper burstier, not faster
(the rate tests measure a transfer against S/R); pyroute2's ethtool cannot reach a namespace's links.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from typing import Iterable, Iterator, Optional, Sequence, Union

from pyroute2.netlink.exceptions import NetlinkError

from envmatrix.errors import PlanError
from envmatrix.network import netlink, state
from envmatrix.network.conditions import Condition

ROOT_HANDLE = 0xE1A00000  # e1a0:  envmatrix's root (htb, or netem without a rate)
CLASS_HANDLE = 0xE1A00010  # e1a0:10, htb's default class
NETEM_HANDLE = 0xE1A10000  # e1a1:
INGRESS_HANDLE = 0xFFFF0000
IFB_PREFIX = "emxifb"
_CAP_NET_ADMIN = 12
_ETH_P_ALL = 0x0003


@dataclass(frozen=True)
class Link:
    """An interface, in a named network namespace or (None) in this process's."""

    netns: Optional[str]
    ifname: str

    def __str__(self) -> str:
        return netlink.where(self.netns, self.ifname)


LinkLike = Union[Link, tuple]


def as_link(link: LinkLike) -> Link:
    return link if isinstance(link, Link) else Link(link[0], link[1])


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


# -- up-front checks


def privilege_problem() -> Optional[str]:
    """None when this process may change qdiscs: the capability counts, not the uid (a root in a container
    without CAP_NET_ADMIN may not)."""
    try:
        with open("/proc/self/status") as fh:
            caps = next(int(line.split()[1], 16) for line in fh if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        caps = (1 << _CAP_NET_ADMIN) if os.geteuid() == 0 else 0
    return None if caps & (1 << _CAP_NET_ADMIN) else "needs root or CAP_NET_ADMIN to install qdiscs"


@functools.lru_cache(maxsize=1)
def kernel_support() -> dict[str, Optional[str]]:
    """What the kernel can do, tried in a throw-away namespace: feature -> None (works) or the kernel's answer."""
    answers: dict[str, Optional[str]] = {}
    name = f"emxk{os.getpid()}"
    netlink.create_namespace(name)
    try:
        with netlink.route(name) as ipr:
            ipr.link("add", ifname="k0", kind="veth", peer="k1")
            index = netlink.ifindex(ipr, name, "k0")
            ipr.link("set", index=index, state="up")
            answers["htb"] = _try(lambda: _add_htb(ipr, index, 10**9))
            answers["netem"] = _try(lambda: ipr.tc("add", "netem", index=index, parent=CLASS_HANDLE, handle=NETEM_HANDLE,
                                                   delay=1000))
            answers["ifb"] = _try(lambda: ipr.link("add", ifname="kifb", kind="ifb"))
            answers["ingress"] = _try(lambda: ipr.tc("add", "ingress", index=index))
            if answers["ifb"] is None and answers["ingress"] is None:
                ifb = netlink.ifindex(ipr, name, "kifb")
                answers["mirred"] = _try(lambda: _add_redirect(ipr, index, ifb))
            else:
                answers["mirred"] = "not tried (no ifb or ingress qdisc)"
    finally:
        netlink.remove_namespace(name)
    return answers


def _try(call) -> Optional[str]:
    try:
        call()
    except NetlinkError as exc:
        return f"{os.strerror(exc.code)} (errno {exc.code})"
    return None


_MODULE = {"htb": "sch_htb", "netem": "sch_netem", "ifb": "ifb", "ingress": "sch_ingress", "mirred": "cls_u32 + act_mirred"}


def _needs(condition: Condition) -> list[str]:
    needs = ["htb"] if condition.rate_bps is not None else []
    if condition.needs_netem:
        needs.append("netem")
    if condition.ingress:
        needs += ["ifb", "ingress", "mirred"]
    return needs


def check_applicable(links: Iterable[LinkLike], condition: Condition, allow_default_route: bool = False) -> None:
    """Refuse, before anything launches, what ``shaped`` could not do or must not do: a one-line PlanError."""
    if not condition.shaped:
        return
    label = f"network condition {condition.name} ({condition.describe()})"
    problem = privilege_problem()
    if problem:
        raise PlanError(f"{label}: {problem}; run as root, or leave the network axis out")
    support = kernel_support()
    missing = [f"{_MODULE[n]} ({support.get(n)})" for n in _needs(condition) if support.get(n)]
    if missing:
        works = [w for w, ok in (("rate via htb", support.get("htb") is None),
                                 ("ingress via ifb", all(support.get(k) is None for k in ("ifb", "ingress", "mirred"))))
                 if ok]
        raise PlanError(f"{label}: this kernel lacks {', '.join(missing)}, so "
                        f"{'delay, jitter and loss' if 'netem' in _needs(condition) and support.get('netem') else 'it'}"
                        f" cannot be applied; what still works here: {', '.join(works) or 'nothing'}")
    for link in map(as_link, links):
        _check_link(link, label, allow_default_route)


def _check_link(link: Link, label: str, allow_default_route: bool) -> None:
    try:
        with netlink.route(link.netns) as ipr:
            index = netlink.ifindex(ipr, link.netns, link.ifname)
            if netlink.is_loopback(ipr, index) and not allow_default_route:
                raise PlanError(f"{label}: {link} is the loopback interface; envmatrix never shapes it "
                                "(allow_default_route: true overrides)")
            if index in netlink.default_route_interfaces(ipr) and not allow_default_route:
                raise PlanError(f"{label}: {link} carries the default route; shaping it could cut this machine off "
                                "(allow_default_route: true overrides); shape the links between the hosts instead")
            if any(i.what == "filter" and i.parent != INGRESS_HANDLE for i in netlink.tc_tree(ipr, index)):
                raise PlanError(f"{label}: {link} has tc filters under its root qdisc, which envmatrix could not put "
                                "back exactly; remove them or shape another interface")
    except netlink.NetlinkFailed as exc:
        raise PlanError(f"{label}: {exc}") from None


# -- install and undo


def _add_htb(ipr, index: int, rate_bps: int) -> None:
    rate = rate_bps // 8  # bytes per second, as the kernel counts
    ipr.tc("add", "htb", index=index, handle=ROOT_HANDLE, default=CLASS_HANDLE & 0xFFFF)
    # quantum: one class only, so it just has to be in the kernel's comfortable range (no warning in dmesg)
    ipr.tc("add-class", "htb", index=index, handle=CLASS_HANDLE, parent=ROOT_HANDLE, rate=rate, ceil=rate,
           quantum=max(1514, min(200000, rate // 10)))


def _add_redirect(ipr, index: int, ifb_index: int) -> None:
    # u32 matching everything, not matchall: cls_matchall is missing from kernels where cls_u32 is built in.
    ipr.tc("add-filter", "u32", index=index, parent=INGRESS_HANDLE, prio=10, protocol=_ETH_P_ALL, target=0x1,
           keys=["0x0/0x0+0"], action={"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": ifb_index})


def _install_tree(ipr, index: int, condition: Condition) -> None:
    parent = None
    if condition.rate_bps is not None:
        _add_htb(ipr, index, condition.rate_bps)
        parent = CLASS_HANDLE
    if condition.needs_netem:
        kwargs = {"delay": round(condition.delay_s * 1e6), "jitter": round(condition.jitter_s * 1e6),
                  "loss": condition.loss_pct}
        if parent is not None:
            kwargs["parent"] = parent
        ipr.tc("add", "netem", index=index, handle=NETEM_HANDLE, **kwargs)


def _ifb_name(index: int) -> str:
    return f"{IFB_PREFIX}{index}"[:15]


def _config(items: Sequence[netlink.TcItem]) -> list[str]:
    return sorted(f"{i.what} {i.config.hex()}" for i in items if i.what != "filter" and i.parent != INGRESS_HANDLE)


def _user_items(items: Sequence[netlink.TcItem]) -> list[netlink.TcItem]:
    """The egress qdiscs and classes someone configured (the kernel's default root has handle 0)."""
    roots = [i for i in items if i.what == "qdisc" and i.parent == netlink.TC_H_ROOT]
    if not roots or roots[0].handle == 0:
        return []
    return [i for i in items if i.what in ("qdisc", "class") and i.parent != INGRESS_HANDLE
            and not (i.what == "qdisc" and i.parent == netlink.TC_H_INGRESS)]


def _entry(link: Link, index: int, condition: Condition, saved: Sequence[netlink.TcItem], has_ingress: bool) -> dict:
    return {
        "netns": link.netns, "ifname": link.ifname, "ifindex": index, "condition": condition.describe(),
        "root": ROOT_HANDLE if condition.rate_bps is not None else NETEM_HANDLE,
        "ingress": condition.ingress and not has_ingress,
        "ifb": _ifb_name(index) if condition.ingress else None,
        "saved": [{"what": i.what, "kind": i.kind, "handle": i.handle, "parent": i.parent, "config": i.config.hex()}
                  for i in saved],
        "saved_config": _config(saved),
    }


def _install(link: Link, condition: Condition, key: str) -> tuple[dict, LinkProof]:
    with netlink.route(link.netns) as ipr:
        index = netlink.ifindex(ipr, link.netns, link.ifname)
        items = netlink.tc_tree(ipr, index)
        has_ingress = any(i.what == "qdisc" and i.parent == netlink.TC_H_INGRESS for i in items)
        if condition.ingress and has_ingress:
            raise PlanError(f"network condition {condition.name}: {link} has an ingress qdisc already; "
                            "envmatrix shapes the receive side only where it owns the ingress hook")
        saved = _user_items(items)
        entry = _entry(link, index, condition, saved, has_ingress)
        proof = LinkProof(str(link), netlink.render(items, with_stats=False))
        state.record(key, entry)  # before the first change: a kill -9 from here on is cleaned up by the next command
        try:
            if saved:
                netlink.delete_qdisc(ipr, index, netlink.TC_H_ROOT)
            _install_tree(ipr, index, condition)
            if condition.ingress:
                ifb = entry["ifb"]
                ipr.link("add", ifname=ifb, kind="ifb")
                ifb_index = netlink.ifindex(ipr, link.netns, ifb)
                ipr.link("set", index=ifb_index, state="up")
                _install_tree(ipr, ifb_index, condition)
                ipr.tc("add", "ingress", index=index)
                _add_redirect(ipr, index, ifb_index)
        except BaseException:
            undo_entry(entry)  # half-made: put the link back as it was before raising
            state.forget(key)
            raise
    proof.before = dump(link, entry)
    return entry, proof


def dump(link: Link, entry: Optional[dict] = None) -> str:
    """The link's tree as text with statistics (and its ifb's, when the entry shapes ingress)."""
    with netlink.route(link.netns) as ipr:
        text = netlink.render(netlink.tc_tree(ipr, netlink.ifindex(ipr, link.netns, link.ifname)))
        ifb = (entry or {}).get("ifb")
        if ifb and ipr.link_lookup(ifname=ifb):
            text += f"\n[{ifb}: ingress of {link.ifname}]\n" + netlink.render(netlink.tc_tree(ipr, netlink.ifindex(ipr, link.netns, ifb)))
    return text


def undo_entry(entry: dict) -> list[str]:
    """Remove what ``entry`` installed and put the saved tree back; what was removed, one phrase each.

    Safe to repeat and safe on a half-made installation: only envmatrix's own handles and ifb are removed.
    """
    link = Link(entry["netns"], entry["ifname"])
    if not netlink.namespace_exists(link.netns):
        return []  # the namespace (and everything in it) is gone already
    removed = []
    with netlink.route(link.netns) as ipr:
        found = ipr.link_lookup(ifname=link.ifname)
        if found:
            index = found[0]
            items = netlink.tc_tree(ipr, index)
            root = next((i for i in items if i.what == "qdisc" and i.parent == netlink.TC_H_ROOT), None)
            if root is not None and root.handle in (ROOT_HANDLE, NETEM_HANDLE):
                netlink.delete_qdisc(ipr, index, netlink.TC_H_ROOT)
                removed.append(f"{root.kind} on {link}")
            if entry.get("ingress") and netlink.delete_qdisc(ipr, index, netlink.TC_H_INGRESS):
                removed.append(f"ingress redirect on {link}")
            saved = [netlink.TcItem(s["what"], s["kind"], s["handle"], s["parent"], bytes.fromhex(s["config"]))
                     for s in entry.get("saved", [])]
            now = _config(netlink.tc_tree(ipr, index))
            if saved and now != entry["saved_config"]:
                if any(i.what == "qdisc" and i.parent == netlink.TC_H_ROOT and i.handle != 0 for i in netlink.tc_tree(ipr, index)):
                    netlink.delete_qdisc(ipr, index, netlink.TC_H_ROOT)  # something else took the root meanwhile
                netlink.restore_items(link.netns, saved)
                removed.append(f"restored {saved[0].kind} on {link}")
        ifb = entry.get("ifb")
        if ifb and ipr.link_lookup(ifname=ifb):
            ipr.link("del", index=ipr.link_lookup(ifname=ifb)[0])
            removed.append(f"ifb {ifb}" + (f" (namespace {link.netns})" if link.netns else ""))
    return removed


def restored_exactly(entry: dict) -> bool:
    link = Link(entry["netns"], entry["ifname"])
    with netlink.route(link.netns) as ipr:
        items = netlink.tc_tree(ipr, netlink.ifindex(ipr, link.netns, link.ifname))
    return _config(_user_items(items)) == entry["saved_config"]


@contextlib.contextmanager
def shaped(links: Iterable[LinkLike], condition: Condition, allow_default_route: bool = False) -> Iterator[ShapingProof]:
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
        for key, entry, link_proof in reversed(installed):
            link = Link(entry["netns"], entry["ifname"])
            try:
                if netlink.namespace_exists(link.netns):
                    link_proof.after = dump(link, entry)
                undo_entry(entry)
                link_proof.restored = (not netlink.namespace_exists(link.netns)) or restored_exactly(entry)
                if not link_proof.restored:
                    failures.append(f"{link}: the saved qdisc did not come back byte for byte")
            except (netlink.NetlinkFailed, NetlinkError, OSError) as exc:
                failures.append(f"{link}: {exc}")
                continue  # left in the state file: the next command tries again
            state.forget(key)
        if failures and sys.exc_info()[0] is None:  # never hide the exception that is unwinding
            raise netlink.NetlinkFailed(f"network condition {condition.name}: undo incomplete: {'; '.join(failures)}")


def installed_anywhere(netns_names: Optional[Iterable[Optional[str]]] = None) -> list[tuple[Link, str]]:
    """Every link (this namespace and each named one, or those of ``netns_names``) carrying envmatrix's root
    handle or ifb, recorded or not."""
    found = []
    for netns in [None, *netlink.namespaces()] if netns_names is None else netns_names:
        try:
            with netlink.route(netns) as ipr:
                for link in ipr.get_links():
                    name = link.get_attr("IFLA_IFNAME")
                    if name.startswith(IFB_PREFIX):
                        found.append((Link(netns, name), "ifb"))
                        continue
                    for q in ipr.get_qdiscs(index=link["index"]):
                        if q["index"] == link["index"] and q["parent"] == netlink.TC_H_ROOT and q["handle"] in (ROOT_HANDLE, NETEM_HANDLE):
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
                shaped_index = int(link.ifname[len(IFB_PREFIX):] or 0)  # _ifb_name: the shaped link's index
                if shaped_index and netlink.delete_qdisc(ipr, shaped_index, netlink.TC_H_INGRESS):
                    removed.append(f"ingress redirect on link {shaped_index}" + (f" (namespace {link.netns})" if link.netns else ""))
            elif netlink.delete_qdisc(ipr, index[0], netlink.TC_H_ROOT):
                removed.append(f"{kind} on {link} (unrecorded: what was there before is unknown)")
    return removed
