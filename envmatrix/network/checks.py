"""What is checked before anything is installed or launched: privileges, what the kernel can do (tried once per
process in a throw-away namespace: many cloud kernels lack sch_netem), and which links must never be shaped.
Every refusal is one PlanError line naming what is missing and what still works."""

from __future__ import annotations

import functools
import os
import threading
from typing import Iterable, Optional

from pyroute2.netlink.exceptions import NetlinkError

from envmatrix.errors import PlanError
from envmatrix.network import netlink, qdiscs, tctree
from envmatrix.network.conditions import Condition
from envmatrix.network.netlink import Link, as_link

_CAP_NET_ADMIN = 12


def privilege_problem() -> Optional[str]:
    """None when this process may change qdiscs: the capability counts, not the uid (a root in a container
    without CAP_NET_ADMIN may not)."""
    try:
        with open("/proc/self/status") as fh:
            caps = next(int(line.split()[1], 16) for line in fh if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        caps = (1 << _CAP_NET_ADMIN) if os.geteuid() == 0 else 0
    return None if caps & (1 << _CAP_NET_ADMIN) else "needs root or CAP_NET_ADMIN to install qdiscs"


_SUPPORT_LOCK = threading.Lock()  # threads shaping at once try the kernel once, in one namespace


def kernel_support() -> dict[str, Optional[str]]:
    """What the kernel can do, tried in a throw-away namespace: feature -> None (works) or the kernel's answer."""
    with _SUPPORT_LOCK:
        return dict(_kernel_support())


@functools.lru_cache(maxsize=1)
def _kernel_support() -> dict[str, Optional[str]]:
    answers: dict[str, Optional[str]] = {}
    name = f"emxk{os.getpid()}"
    with netlink.scratch_namespace(name) as ipr:
        ipr.link("add", ifname="k0", kind="veth", peer="k1")
        index = netlink.ifindex(ipr, name, "k0")
        ipr.link("set", index=index, state="up")
        answers["htb"] = _try(lambda: qdiscs.add_htb(ipr, index, 10**9))
        answers["netem"] = _try(lambda: ipr.tc("add", "netem", index=index, parent=qdiscs.CLASS_HANDLE, handle=qdiscs.NETEM_HANDLE,
                                               delay=1000))
        answers["ifb"] = _try(lambda: ipr.link("add", ifname="kifb", kind="ifb"))
        answers["ingress"] = _try(lambda: ipr.tc("add", "ingress", index=index))
        if answers["ifb"] is None and answers["ingress"] is None:
            ifb = netlink.ifindex(ipr, name, "kifb")
            answers["mirred"] = _try(lambda: qdiscs.add_redirect(ipr, index, ifb))
        else:
            answers["mirred"] = "not tried (no ifb or ingress qdisc)"
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


def check_applicable(links: Iterable, condition: Condition, allow_default_route: bool = False) -> None:
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
        _check_link(link, label, condition, allow_default_route)


def _check_link(link: Link, label: str, condition: Condition, allow_default_route: bool) -> None:
    try:
        with netlink.route(link.netns) as ipr:
            index = netlink.ifindex(ipr, link.netns, link.ifname)
            if netlink.is_loopback(ipr, index) and not allow_default_route:
                raise PlanError(f"{label}: {link} is the loopback interface, which every local connection of this host "
                                "takes; envmatrix shapes it only with allow_default_route: true")
            if index in netlink.default_route_interfaces(ipr) and not allow_default_route:
                raise PlanError(f"{label}: {link} carries the default route; shaping it could cut this machine off "
                                "(allow_default_route: true overrides); shape the links between the hosts instead")
            items = tctree.tc_tree(ipr, index)
            if any(i.what == "qdisc" and i.parent == netlink.TC_H_ROOT and i.handle in (qdiscs.ROOT_HANDLE, qdiscs.NETEM_HANDLE)
                   for i in items):
                raise PlanError(f"{label}: {link} is shaped by another envmatrix run already (envmatrix network show "
                                "names it); one condition per link at a time")
            if any(i.what == "filter" and i.parent != qdiscs.INGRESS_HANDLE for i in items):
                raise PlanError(f"{label}: {link} has tc filters under its root qdisc, which envmatrix could not put "
                                "back exactly; remove them or shape another interface")
            if condition.ingress and any(i.what == "qdisc" and i.parent == netlink.TC_H_INGRESS for i in items):
                raise PlanError(f"{label}: {link} has an ingress (or clsact) qdisc already; envmatrix shapes the "
                                "receive side only where it owns the ingress hook (or leave ingress out)")
            if condition.ingress and ipr.link_lookup(ifname=qdiscs.ifb_name(index)):
                raise PlanError(f"{label}: {qdiscs.ifb_name(index)} exists already beside {link} (left by a run whose "
                                "state is elsewhere?); envmatrix network reset --unrecorded removes it")
    except netlink.NetlinkFailed as exc:
        raise PlanError(f"{label}: {exc}") from None
