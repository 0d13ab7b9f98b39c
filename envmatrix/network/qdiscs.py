"""The trees envmatrix installs, under handles of its own so they are recognisable (tcconfig's idea): htb ``e1a0:``
at the root with its default class ``e1a0:10`` at the rate, netem ``e1a1:`` under that class for delay, jitter
and loss (mininet's hierarchy; netem alone at the root without a rate), and for the receive side an ifb
``emxifb<ifindex>`` fed by a u32 + mirred redirect from the link's ingress qdisc."""

from __future__ import annotations

from envmatrix.network.conditions import Condition

ROOT_HANDLE = 0xE1A00000  # e1a0:  envmatrix's root (htb, or netem without a rate)
CLASS_HANDLE = 0xE1A00010  # e1a0:10, htb's default class
NETEM_HANDLE = 0xE1A10000  # e1a1:
INGRESS_HANDLE = 0xFFFF0000
IFB_PREFIX = "emxifb"
ETH_P_ALL = 0x0003


def add_htb(ipr, index: int, rate_bps: int) -> None:
    rate = rate_bps // 8  # bytes per second, as the kernel counts
    ipr.tc("add", "htb", index=index, handle=ROOT_HANDLE, default=CLASS_HANDLE & 0xFFFF)
    # quantum: one class only, so it just has to be in the kernel's comfortable range (no warning in dmesg)
    ipr.tc("add-class", "htb", index=index, handle=CLASS_HANDLE, parent=ROOT_HANDLE, rate=rate, ceil=rate,
           quantum=max(1514, min(200000, rate // 10)))


def add_redirect(ipr, index: int, ifb_index: int) -> None:
    # u32 matching everything, not matchall: cls_matchall is missing from kernels where cls_u32 is built in.
    ipr.tc("add-filter", "u32", index=index, parent=INGRESS_HANDLE, prio=10, protocol=ETH_P_ALL, target=0x1,
           keys=["0x0/0x0+0"], action={"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": ifb_index})


def install_tree(ipr, index: int, condition: Condition) -> None:
    parent = None
    if condition.rate_bps is not None:
        add_htb(ipr, index, condition.rate_bps)
        parent = CLASS_HANDLE
    if condition.needs_netem:
        kwargs = {"delay": round(condition.delay_s * 1e6), "jitter": round(condition.jitter_s * 1e6),
                  "loss": condition.loss_pct}
        if parent is not None:
            kwargs["parent"] = parent
        ipr.tc("add", "netem", index=index, handle=NETEM_HANDLE, **kwargs)


def ifb_name(index: int) -> str:
    return f"{IFB_PREFIX}{index}"[:15]
