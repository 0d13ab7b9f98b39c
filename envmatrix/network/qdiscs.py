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


BURST_S = 0.001  # the burst tc gave htb when it read HZ as 1000 (rate/HZ + mtu)
MTU_BYTES = 1600
MAX_BURST_S = 200.0  # htb's buffer is u32 scheduler ticks (1/15.625 us here): 274 s of the rate at most


def htb_burst(rate: int) -> int:
    """Bytes the class may send at once (``rate`` in bytes per second).

    tc's and pyroute2's default, rate/HZ + mtu, now reads HZ as 10^9 from /proc/net/psched: one MTU, and pyroute2
    truncates its time to whole microseconds, so the kernel got a 625 byte burst at 5 Gbit and 0 at 40 Gbit. A
    sender woken late on a busy host then never catches up: 128 MiB over a veth pair at 5 / 10 Gbit took 1.17-1.19
    / 1.30-1.32 x S/R with it, 1.04 x with a burst of 1 ms of the rate (the rest: TCP/IP headers htb counts).
    """
    return int(min(rate * BURST_S + MTU_BYTES, rate * MAX_BURST_S))


def add_htb(ipr, index: int, rate_bps: int) -> None:
    rate = rate_bps // 8  # bytes per second, as the kernel counts
    ipr.tc("add", "htb", index=index, handle=ROOT_HANDLE, default=CLASS_HANDLE & 0xFFFF)
    # quantum: one class only, so it just has to be in the kernel's comfortable range (no warning in dmesg)
    burst = htb_burst(rate)
    ipr.tc("add-class", "htb", index=index, handle=CLASS_HANDLE, parent=ROOT_HANDLE, rate=rate, ceil=rate,
           burst=burst, cburst=burst, quantum=max(1514, min(200000, rate // 10)))


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
