"""Tables of the pair and peer tests (pure): GPU pair matrices, seed 000's host pair table, seed 002's rail vs
cross table, and a self-contained HTML heatmap. Judgements (slow pair, slow host, flagged cell) come in from
judgement/pairs.py; this module only lays them out.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from envmatrix.bench.aggregate import headline_bw
from envmatrix.bench.formulas import bandwidths
from envmatrix.bench.sizes import format_size
from envmatrix.reporting.text import md_table

Pair = tuple[int, int]


def _f(value: Optional[float], digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


markdown_table = md_table  # one Markdown table writer for every report


# ------------------------------------------------------------------------------------------------ GPU pairs


@dataclass
class GpuPairCell:
    uni_gbps: Optional[float] = None  # src -> dst at the large size
    bidir_gbps: Optional[float] = None  # both ways at once (the unordered pair), both directions together
    latency_us: Optional[float] = None  # one way, half a ping-pong at the small size
    transport: Optional[str] = None  # NCCL's, from its log (P2P/CUMEM, P2P/IPC, SHM, NET/...)
    link: Optional[str] = None  # nvidia-smi topo -m (NV#, PIX, PXB, PHB, NODE, SYS)
    wrong: int = 0


def gpu_cells(metrics: Sequence[Mapping[str, Any]], large: int, small: int, transports: Mapping[Pair, str],
              links: Mapping[Pair, str]) -> dict[Pair, GpuPairCell]:
    """Ordered pair -> its cell, from a pairs run's aggregated rows."""
    cells: dict[Pair, GpuPairCell] = {}

    def cell(pair: Pair) -> GpuPairCell:
        return cells.setdefault(pair, GpuPairCell(transport=transports.get(pair), link=links.get(pair)))

    for m in metrics:
        if not m.get("pair"):
            continue
        a, b = (int(x) for x in m["pair"])
        name, size = m.get("collective"), m.get("size_bytes")
        if name == "pair_uni" and size == large:
            cell((a, b)).uni_gbps = headline_bw(m)
        elif name == "pair_bidir" and size == 2 * large:
            cell((a, b)).bidir_gbps = cell((b, a)).bidir_gbps = headline_bw(m)
        elif name == "pair_latency" and size == small:
            cell((a, b)).latency_us = cell((b, a)).latency_us = m.get("time_us")
        else:
            continue
        cell((a, b)).wrong += int(m.get("wrong") or 0)
    return cells


def gpu_matrix(cells: Mapping[Pair, GpuPairCell], gpus: Sequence[int], what: str,
               flags: Optional[Mapping[Pair, Optional[float]]] = None) -> tuple[list[str], list[list[str]]]:
    """Rows: sender GPU, columns: receiver GPU; each cell the figure, its link type and NCCL transport; ``!``
    marks a pair its link class's median judged slow (the ratio after it)."""
    header = ["from \\ to"] + [f"GPU{g}" for g in gpus]
    rows = []
    for a in gpus:
        row = [f"GPU{a}"]
        for b in gpus:
            c = cells.get((a, b))
            if a == b or c is None:
                row.append("X" if a == b else "-")
                continue
            value = {"uni": c.uni_gbps, "bidir": c.bidir_gbps, "latency": c.latency_us}[what]
            flag = (flags or {}).get((a, b))
            text = _f(value, 1 if what != "latency" else 2) + (f" !{flag:.2f}" if flag is not None else "")
            row.append(f"{text} {c.link or '?'} {c.transport or '?'}")
        rows.append(row)
    return header, rows


def ratio_matrix(first: Mapping[Pair, GpuPairCell], second: Mapping[Pair, GpuPairCell], gpus: Sequence[int],
                 what: str = "uni") -> tuple[list[str], list[list[str]]]:
    """second / first per ordered pair (e.g. NCCL_P2P_DISABLE=1 over the default: seed 004's P2P vs SHM)."""
    header = ["from \\ to"] + [f"GPU{g}" for g in gpus]
    rows = []
    for a in gpus:
        row = [f"GPU{a}"]
        for b in gpus:
            x = getattr(first.get((a, b)), f"{what}_gbps" if what != "latency" else "latency_us", None)
            y = getattr(second.get((a, b)), f"{what}_gbps" if what != "latency" else "latency_us", None)
            row.append("X" if a == b else (f"{y / x:.2f}" if x and y is not None else "-"))
        rows.append(row)
    return header, rows


# ------------------------------------------------------------------------------------------------ host pairs

HOST_COLUMNS = ("host 1 (recv)", "host 2 (send)", "round", "RTT p2p (ms)", "ping (ms)", "{b}-T (ms)", "{b}-B (GB/s)",
                "iperf3 (GB/s)", "judged")


@dataclass
class HostPairRow:
    recv: str
    send: str
    round: int
    rtt_ms: Optional[float]  # small-message p2p round trip
    ping_ms: Optional[str]  # a figure, or why none ("not installed")
    time_ms: Optional[float]  # one message of the pair size, sender to receiver, at its median iteration
    gbps: Optional[float]  # at that median iteration: the figure the judgement reads (typical_gbps)
    iperf3: str  # a figure in GB/s, or why none ("not installed", an error)
    judged: str = ""


def host_pair_table(rows: Sequence[HostPairRow], backend: str) -> tuple[list[str], list[list[str]]]:
    header = [c.format(b=backend) for c in HOST_COLUMNS]
    body = [[r.recv, r.send, str(r.round), _f(r.rtt_ms, 3), r.ping_ms or "-", _f(r.time_ms, 2), _f(r.gbps, 3),
             r.iperf3, r.judged] for r in rows]
    return header, body


# ------------------------------------------------------------------------------------------------ peers


def peers_table(metrics: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Seed 002's table: per message size, GB/s per rank of each peer group run, and rail / cross."""
    groups = list(dict.fromkeys(m["peer_group"] for m in metrics if m.get("peer_group")))
    by = {(m["peer_group"], m["message_bytes"]): m for m in metrics if m.get("peer_group")}
    sizes = sorted({size for _, size in by})
    header = ["message size"] + [f"{g} (GB/s)" for g in groups]
    if "rail" in groups and "cross" in groups:
        header.append("rail / cross")
    rows = []
    for size in sizes:
        row = [format_size(size)]
        vals = {g: headline_bw(by[(g, size)]) if (g, size) in by else None for g in groups}
        row += [_f(vals[g]) for g in groups]
        if "rail" in groups and "cross" in groups:
            rail, cross = vals["rail"], vals["cross"]
            row.append(f"{rail / cross:.2f}" if rail and cross else "-")
        rows.append(row)
    return header, rows


def peer_lists(metrics: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per peer group: each rank's peers and whom its received bytes came from (the check's decoding)."""
    lines = []
    seen = set()
    for m in metrics:
        group = m.get("peer_group")
        if not group or group in seen:
            continue
        seen.add(group)
        peers = m.get("peers_by_rank") or {}
        heard = m.get("heard_from_by_rank") or {}
        parts = [f"{r}->{','.join(map(str, p))}" + (f" (heard {','.join(sorted(heard[r], key=int))})" if r in heard else "")
                 for r, p in sorted(peers.items(), key=lambda kv: int(kv[0]))]
        lines.append(f"{group} ({m.get('split')}, {m.get('messages')} messages, in flight {m.get('inflight')}): "
                     + "; ".join(parts))
    return lines


# ------------------------------------------------------------------------------------------------ HTML heatmap


def heatmap_html(title: str, labels: Sequence[str], values: Mapping[tuple[int, int], Optional[float]],
                 notes: Optional[Mapping[tuple[int, int], str]] = None, unit: str = "GB/s",
                 higher_is_better: bool = True) -> str:
    """A self-contained table: cell colour from the value (green high, red low, or the reverse), the note below."""
    found = [v for v in values.values() if v is not None]
    lo, hi = (min(found), max(found)) if found else (0.0, 1.0)

    def colour(v: Optional[float]) -> str:
        if v is None:
            return "#eeeeee"
        t = 0.5 if hi == lo else (v - lo) / (hi - lo)
        t = t if higher_is_better else 1 - t
        return f"hsl({int(120 * t)}, 65%, 72%)"

    out = [f"<h3>{html.escape(title)}</h3>", '<table class="pairs-heatmap" style="border-collapse:collapse">',
           "<tr><th></th>" + "".join(f"<th>{html.escape(l)}</th>" for l in labels) + "</tr>"]
    for i, row_label in enumerate(labels):
        cells = [f"<th>{html.escape(row_label)}</th>"]
        for j in range(len(labels)):
            if i == j:
                cells.append('<td style="background:#cccccc;text-align:center">X</td>')
                continue
            v = values.get((i, j))
            note = (notes or {}).get((i, j), "")
            text = "-" if v is None else f"{v:.2f}"
            cells.append(f'<td style="background:{colour(v)};padding:3px 6px;text-align:center" '
                         f'title="{html.escape(note)}">{text}<br><small>{html.escape(note)}</small></td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append(f"</table><p><small>{html.escape(unit)}; range {lo:.2f} to {hi:.2f}</small></p>")
    return "\n".join(out)


def host_pair_rows(metrics: Sequence[Mapping[str, Any]], net: Sequence[Mapping[str, Any]], hosts: Sequence[str],
                   large: int, small: int, iperf3_status: Mapping[frozenset, str], ping_status: Mapping[frozenset, str],
                   judged: Optional[Mapping[Pair, str]] = None) -> list[HostPairRow]:
    """Seed 000's rows, one per ordered (receiver, sender) pair of ranks (one rank per host): the rank-level p2p
    figures, then the tools' (``net``: iperf3 rows per ordered pair, ping rows per pair). A tool without a figure
    shows why, from its pair's status (``iperf3_status``: {a, b} -> "not installed", "failed: ...")."""
    uni = {tuple(m["pair"]): m for m in metrics if m.get("collective") == "pair_uni" and m.get("size_bytes") == large}
    lat = {frozenset(m["pair"]): m for m in metrics if m.get("collective") == "pair_latency"
           and m.get("size_bytes") == small}
    iperf = {tuple(m["pair"]): m for m in net if m.get("collective") == "iperf3"}
    ping = {frozenset(m["pair"]): m for m in net if m.get("collective") == "ping"}
    rows = []
    for (src, dst), m in sorted(uni.items(), key=lambda kv: (kv[1].get("round", 0), kv[0][1], kv[0][0])):
        recv, send = dst, src
        key = frozenset((recv, send))
        rtt = lat.get(key)
        tool = iperf.get((recv, send))
        pinged = ping.get(key)
        rows.append(HostPairRow(
            hosts[recv], hosts[send], int(m.get("round", 0)),
            None if rtt is None else 2 * rtt["time_us"] / 1e3,
            f"{pinged['time_us'] / 1e3:.3f}" if pinged else ping_status.get(key, "-"),
            typical_time_us(m) / 1e3, typical_gbps(m),
            f"{tool['algbw_gbps']:.3f}" if tool else iperf3_status.get(key, "-"),
            (judged or {}).get((recv, send), ""),
        ))
    return rows


def typical_time_us(row: Mapping[str, Any]) -> float:
    """A host pair's time at its median iteration, so one stalled iteration on a busy host does not make a pair
    slow (a slow link is slow every time). The host table shows it and the judgement reads it: the mean had the
    table show one pair lowest and the judgement call another slow."""
    return row.get("time_median_us") or row["time_us"]


def typical_gbps(row: Mapping[str, Any]) -> float:
    """A host pair's GB/s at its median iteration (``typical_time_us``)."""
    return bandwidths(row["collective"], row["size_bytes"], typical_time_us(row), 2)[0]


def report_heatmaps(results: Sequence[Any]) -> list[str]:
    """The HTML report's pair section: per stored pair test, one way GB/s per ordered pair at its largest size
    (row: sender, column: receiver), each cell noted with its ``nvidia-smi topo -m`` link where the run's host
    facts recorded the matrix."""
    from envmatrix.parsers.nvidia_topo import parse_topo_matrix

    out = []
    for result in results:
        uni = [m for m in result.metrics if m.get("collective") == "pair_uni" and m.get("pair")]
        if not uni:
            continue
        largest = max(m["size_bytes"] for m in uni)
        values = {tuple(int(x) for x in m["pair"]): headline_bw(m) for m in uni if m["size_bytes"] == largest}
        world = max(max(p) for p in values) + 1
        gpus = result.backend == "nccl" and result.grid.startswith("1x")
        names = {r.rank: r.hostname for r in result.ranks if r.hostname}
        hosts = [names.get(i, f"node{i}") for i in range(world)]
        labels = ([f"GPU{i}" for i in range(world)] if gpus
                  else hosts if len(set(hosts)) == world else [f"node{i}" for i in range(world)])  # emulated: one name
        links = parse_topo_matrix((result.host or {}).get("topology") or "").links if gpus else {}
        # said: the run's own pairs_hosts.html has the receiver on the row (seed 000's order), this the sender
        title = (f"{result.setup_name} on {result.grid} ({result.backend}): one way GB/s at {format_size(largest)} "
                 "(row sends to column)")
        out.append(heatmap_html(title, labels, values, {p: links.get(p, "") for p in values}))
    return out
