"""A link's traffic-control tree as the kernel dumps it: each qdisc, class and filter decoded by pyroute2 (for the
``tc -s qdisc show``-like text stored as proof) and kept in the kernel's own bytes (for saving a tree and putting
it back exactly: the saved messages are sent again verbatim, less their statistics and counters)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Optional

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from envmatrix.network.conditions import format_rate
from envmatrix.network.netlink import (NLM_F_CREATE, NLM_F_EXCL, RTM_NEWQDISC, RTM_NEWTCLASS, RTM_NEWTFILTER, TC_H_INGRESS,
                                       TC_H_ROOT, route, send_raw)

# The attributes that are configuration (kind, options, size table); the rest of a dump is statistics and
# state (TCA_STATS*, TCA_XSTATS, TCA_HW_OFFLOAD, TCA_CHAIN) the kernel fills in itself.
_CONFIG_ATTRS = {1: "TCA_KIND", 2: "TCA_OPTIONS", 10: "TCA_STAB"}
_NLMSG_HDR_SIZE = 16
_TCMSG = struct.Struct("=BxxxiIII")


@dataclass(frozen=True)
class TcItem:
    """One qdisc, class or filter of a link, with its configuration as the kernel dumped it."""

    what: str  # "qdisc", "class" or "filter"
    kind: str
    handle: int
    parent: int
    config: bytes  # tcmsg header + configuration attributes, in the kernel's own bytes
    options: dict = field(default_factory=dict, compare=False)  # pyroute2's decoding, for the text
    stats: dict = field(default_factory=dict, compare=False)

    def line(self, with_stats: bool = True) -> str:
        place = "root" if self.parent == TC_H_ROOT else ("ingress" if self.parent == TC_H_INGRESS else f"parent {fmt_handle(self.parent)}")
        text = f"{self.what} {self.kind} {fmt_handle(self.handle)} {place}"
        opts = _options_text(self.kind, self.options)
        if opts:
            text += f" {opts}"
        if with_stats and self.stats:
            s = self.stats
            text += (f"\n Sent {s.get('bytes', 0)} bytes {s.get('packets', 0)} pkt (dropped {s.get('drop', 0)}, "
                     f"overlimits {s.get('overlimits', 0)} requeues {s.get('requeues', 0)})")
        return text


def fmt_handle(handle: int) -> str:
    major, minor = handle >> 16, handle & 0xFFFF
    return f"{major:x}:{minor:x}" if minor else f"{major:x}:"


def _options_text(kind: str, options: dict) -> str:
    words = []
    for name, value in options.items():
        if not isinstance(value, dict):
            continue
        for key in ("rate", "ceil", "limit", "delay", "jitter", "loss", "defcls", "buffer"):
            if key in value and value[key]:
                v = value[key]
                if key in ("rate", "ceil"):
                    v = format_rate(v * 8)
                elif key == "defcls":
                    key, v = "default", hex(v)
                words.append(f"{key} {v}")
    return " ".join(words)


def _decode_options(msg) -> dict:
    opts = msg.get_attr("TCA_OPTIONS")
    out: dict = {}
    if opts is None or not hasattr(opts, "get"):
        return out
    for name, value in opts.get("attrs", []):
        if hasattr(value, "items"):
            out[name] = {k: v for k, v in value.items() if isinstance(v, (int, str))}
    return out


def _stats(msg) -> dict:
    stats = msg.get_attr("TCA_STATS")
    return {k: stats[k] for k in ("bytes", "packets", "drop", "overlimits")} if stats else {}


def _config_bytes(msg) -> bytes:
    """The message's tcmsg header and configuration attributes, in the kernel's bytes; statistics dropped."""
    raw = bytes(msg.data[msg.offset:msg.offset + msg["header"]["length"]])
    body = raw[_NLMSG_HDR_SIZE:]
    out = bytearray(body[:_TCMSG.size])
    if msg["header"]["type"] != RTM_NEWTFILTER:
        out[16:20] = b"\0\0\0\0"  # tcm_info of a qdisc or class is its reference count: state, not configuration
    pos = _TCMSG.size
    while pos + 4 <= len(body):
        length, kind = struct.unpack_from("=HH", body, pos)
        if length < 4:
            break
        if (kind & 0x3FFF) in _CONFIG_ATTRS:
            attr = bytearray(body[pos:pos + length])
            if kind == 2 and msg.get_attr("TCA_KIND") == "htb" and msg["header"]["type"] == RTM_NEWQDISC:
                _zero_htb_direct_pkts(attr)
            out += attr + b"\0" * ((4 - length % 4) % 4)
        pos += (length + 3) & ~3
    return bytes(out)


def _zero_htb_direct_pkts(options: bytearray) -> None:
    # htb's TCA_HTB_INIT (struct tc_htb_glob) carries direct_pkts, a packet counter, beside its configuration.
    _patch_htb_init(options, 16, 0)


def _patch_htb_init(options: bytearray, offset: int, value: int) -> None:
    """Set the u32 at ``offset`` of TCA_HTB_INIT (struct tc_htb_glob) inside a TCA_OPTIONS attribute."""
    pos = 4
    while pos + 4 <= len(options):
        length, kind = struct.unpack_from("=HH", options, pos)
        if length < 4:
            return
        if kind == 2 and length >= 4 + 20:  # TCA_HTB_INIT
            struct.pack_into("=I", options, pos + 4 + offset, value)
        pos += (length + 3) & ~3


def _replayable(item: TcItem) -> bytes:
    """The saved bytes as a request: htb dumps its full version (HTB_VER, 0x30011) but accepts only its major (3)."""
    if item.what != "qdisc" or item.kind != "htb":
        return item.config
    config = bytearray(item.config)
    pos = _TCMSG.size
    while pos + 4 <= len(config):
        length, kind = struct.unpack_from("=HH", config, pos)
        if length < 4:
            break
        if kind == 2:
            options = bytearray(config[pos:pos + length])
            _patch_htb_init(options, 0, 3)
            config[pos:pos + length] = options
        pos += (length + 3) & ~3
    return bytes(config)


def _item(what: str, msg) -> TcItem:
    return TcItem(what, msg.get_attr("TCA_KIND") or "", msg["handle"], msg["parent"], _config_bytes(msg),
                  _decode_options(msg), _stats(msg))


def tc_tree(ipr: IPRoute, index: int) -> list[TcItem]:
    """Every qdisc and class of the link (the ingress side included), then the filters hanging on them."""
    qdiscs = [_item("qdisc", m) for m in ipr.get_qdiscs(index=index) if m["index"] == index]
    classes = [_item("class", m) for m in ipr.get_classes(index=index) if m["index"] == index]
    filters = []
    for parent in {q.handle for q in qdiscs if q.handle} | {c.handle for c in classes}:
        try:
            found = ipr.get_filters(index=index, parent=parent)
        except NetlinkError:
            continue
        filters += [_item("filter", m) for m in found if m["index"] == index]
    return qdiscs + classes + filters


def render(items: list[TcItem], with_stats: bool = True) -> str:
    return "\n".join(i.line(with_stats) for i in items)


def restore_items(netns: Optional[str], items: list[TcItem]) -> None:
    """Create ``items`` (qdiscs and classes) again from their saved bytes, parents first. A class the kernel
    made with its qdisc (tbf's 1:1) is there already and is left as the qdisc made it."""
    ordered = _parents_first([i for i in items if i.what in ("qdisc", "class")])
    with route(netns) as ipr:
        for item in ordered:
            if item.what == "class":
                index = _TCMSG.unpack_from(item.config, 0)[1]
                if any(c["handle"] == item.handle for c in ipr.get_classes(index=index) if c["index"] == index):
                    continue
            send_raw(netns, [(RTM_NEWQDISC if item.what == "qdisc" else RTM_NEWTCLASS, NLM_F_CREATE | NLM_F_EXCL,
                              _replayable(item))])


def _parents_first(items: list[TcItem]) -> list[TcItem]:
    """A qdisc after the class it hangs on; a class after its parent class, else after its own qdisc."""
    qdiscs = {i.handle: i for i in items if i.what == "qdisc"}
    classes = {i.handle: i for i in items if i.what == "class"}
    done: list[TcItem] = []
    seen: set[int] = set()

    def visit(item: TcItem) -> None:
        if id(item) in seen:
            return
        seen.add(id(item))
        if item.what == "qdisc":
            parent = classes.get(item.parent)
        else:
            parent = classes.get(item.parent) or qdiscs.get(item.handle & 0xFFFF0000)
        if parent is not None and parent is not item:
            visit(parent)
        done.append(item)

    for item in items:
        visit(item)
    return done
