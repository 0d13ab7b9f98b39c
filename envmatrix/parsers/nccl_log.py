"""Parse NCCL's NCCL_DEBUG=INFO / WARN text (checked against NCCL 2.28.9).

Pure: text in, :class:`NcclLogSummary` out; never raises on odd input.  The
text may be one rank's stderr, several ranks' logs concatenated, or NCCL lines
interleaved with Python tracebacks and torch warnings.

NCCL's line prefix (src/debug.cc) is ``[timestamp] host:pid:tid [cudaDev] NCCL INFO msg``
for INFO and ``[timestamp] host:pid:tid [cudaDev] file.cc:LINE NCCL WARN msg`` for WARN
(the timestamp is printed for WARN only by default).  The parser keys on the
``NCCL INFO `` / ``NCCL WARN `` marker and reads the message after it, so any
prefix (timestamps, torchrun's ``[rank0]:``) is tolerated.

Message formats matched (NCCL 2.28 sources given where they come from):

* ``NCCL version 2.28.9+cuda13.0`` (init.cc; bare, without prefix, under
  NCCL_DEBUG=WARN/VERSION); fallback: torch's ``..., NCCL version 2.28.9``.
* ``cudaDriverVersion 13000`` (misc/cudawrap.cc).
* ``Using network Socket`` (init.cc).
* ``comm 0x.. rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0`` (init.cc).
* ``ncclCommInitRankConfig comm 0x.. rank 0 nranks 4 ... - Init START|COMPLETE``.
* ``2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer``.
* ``Channel 00/0 : 3[3] -> 0[0] [receive] via NET/Socket/0`` and
  ``... [send] via NET/IB/0(1)/GDRDMA(PCI)/Shared`` (transport/net.cc),
  ``Channel 00/1 : 0[0] -> 1[1] via P2P/CUMEM`` (also ``P2P/MNNVL``, ``P2P/IPC``,
  ``P2P/direct pointer``, ``P2P/indirect/2[2]``, each optionally ``/read``, ``/CE``;
  transport/p2p.cc), ``Channel 00 : 0[0] -> 1[1] via SHM/direct/direct``
  (transport/shm.cc), ``CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA``.
  Ring lines ``Channel 00/24 : 0 1 2 3`` are not peer connections and are skipped.
* Net plugin (plugin/plugin_open.cc, plugin/net.cc):
  ``NET/Plugin: Could not find: libnccl-net.so`` (not loaded),
  ``NET/Plugin: libnccl-net-x.so: <dlerror>`` (not loaded),
  ``External network plugin <lib> is unsupported`` (not loaded),
  ``Successfully loaded external network plugin <path>`` (loaded),
  ``Initialized NET plugin Socket`` / ``Failed to initialize NET plugin IB``,
  WARN ``Failed to initialize any NET plugin``.  Pre-2.19 forms
  ``NET/Plugin: Loaded net plugin X (v8)`` / ``NET/Plugin : No plugin found`` too.
* ``NCCL_X set by environment to Y`` (a trailing ``.`` after integers dropped,
  misc/param.cc) and ``NCCL_X set to Y``.
* ``NET/Socket : Using [0]eth0:10.0.0.1<0> [1]...`` and ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ...``
  (transport/net_socket.cc, net_ib.cc): the devices each network uses (``NET/IB : Using [RO]; OOB ...``
  names none).
* TUNING (NCCL_DEBUG_SUBSYS includes TUNING; rank 0 only, enqueue.cc):
  ``AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..31}`` (2.28 may append
  `` comm 0x..``): the algorithm and protocol each collective ran with.
* torch's ``Last error:`` followed by the message on the next line, and the
  ``ncclInvalidUsage: ...`` result-code line.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple, Optional, Sequence


class PeerConnection(NamedTuple):
    """One ``Channel ... via ...`` line: a connection this rank set up."""

    channel: int
    src_rank: int
    dst_rank: Optional[int]  # None for CollNet lines (no single peer)
    direction: Optional[str]  # "send" | "receive" | None (P2P/SHM lines say neither)
    transport: str  # normalised label, e.g. "NET/Socket"


class CommInit(NamedTuple):
    """One ``comm 0x.. rank R nRanks N nNodes M localRanks L localRank X MNNVL Y`` line."""

    comm: str
    rank: int
    n_ranks: int
    n_nodes: int
    local_ranks: int
    local_rank: int
    mnnvl: int


class TuningChoice(NamedTuple):
    """One TUNING line: what NCCL picked for one collective call."""

    collective: str  # NCCL's name: "AllReduce"
    size_bytes: int
    algorithm: str  # "RING", "TREE", "NVLS", "PAT", ...
    protocol: str  # "LL", "LL128", "SIMPLE"
    channels: tuple[int, int]


@dataclass
class NcclLogSummary:
    nccl_version: Optional[str] = None  # "2.28.9+cuda13.0" (or torch's "2.28.9")
    cuda_version: Optional[str] = None  # "13.0", from the "+cudaX.Y" suffix
    cuda_driver_version: Optional[int] = None  # 13000, from "cudaDriverVersion"
    network: Optional[str] = None  # "Socket", "IB", plugin's name
    # External net plugin (libnccl-net*.so): the library tried or loaded and
    # whether it loaded.  False also when NCCL says no NET plugin at all could
    # be initialised; None when the text says nothing about it.
    net_plugin: Optional[str] = None
    net_plugin_loaded: Optional[bool] = None
    net_plugins_initialized: list[str] = field(default_factory=list)  # ["Socket"]
    net_plugins_failed: list[str] = field(default_factory=list)  # ["IB"]
    transports: dict[str, int] = field(default_factory=dict)  # {"NET/Socket": 10}
    transport_details: dict[str, int] = field(default_factory=dict)  # raw "via" labels
    peers: list[PeerConnection] = field(default_factory=list)
    rank: Optional[int] = None
    n_ranks: Optional[int] = None
    n_nodes: Optional[int] = None
    local_ranks: Optional[int] = None
    local_rank: Optional[int] = None
    mnnvl: Optional[int] = None
    comms: list[CommInit] = field(default_factory=list)
    coll_channels: Optional[int] = None
    collnet_channels: Optional[int] = None
    nvls_channels: Optional[int] = None
    p2p_channels: Optional[int] = None
    p2p_channels_per_peer: Optional[int] = None
    init_complete: Optional[bool] = None  # None: no "Init START/COMPLETE" line seen
    warnings: list[str] = field(default_factory=list)  # NCCL WARN messages, unique, in order
    last_error: Optional[str] = None  # the line after torch's "Last error:"
    nccl_error: Optional[str] = None  # "ncclInvalidUsage", ... from torch's error text
    env_lines: dict[str, str] = field(default_factory=dict)  # NCCL_X -> value NCCL reported
    net_devices: dict[str, list[str]] = field(default_factory=dict)  # {"Socket": ["eth0"], "IB": ["mlx5_0:1"]}
    tuning: list[TuningChoice] = field(default_factory=list)  # one per TUNING line, in order
    nccl_lines: int = 0  # NCCL INFO/WARN lines seen

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (peers/comms as lists)."""
        d = asdict(self)
        d["peers"] = [list(p) for p in self.peers]
        d["comms"] = [list(c) for c in self.comms]
        d["tuning"] = [list(t) for t in self.tuning]
        d["algorithms"] = algorithms_used(self.tuning)
        return d


# --------------------------------------------------------------------------- regexes

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_MARKER = re.compile(r"(?:^|\s)NCCL (INFO|WARN) (.*)$")
_VERSION = re.compile(r"(?:^|[\s,])NCCL version (\d+\.\d+\.\d+[^\s,]*)")
_CUDA_SUFFIX = re.compile(r"\+cuda(\d+(?:\.\d+)*)")
_DRIVER = re.compile(r"^cudaDriverVersion (\d+)")
_NETWORK = re.compile(r"^Using network (.+?)\s*$")
_COMM = re.compile(
    r"^comm (\S+) rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+) localRank (\d+) MNNVL (\d+)"
)
_INIT = re.compile(r"^ncclCommInit\w* comm \S+ rank (\d+) nranks (\d+) .*- Init (START|COMPLETE)")
_CHANNELS = re.compile(
    r"^(\d+) coll channels,(?: (\d+) collnet channels,)?(?: (\d+) nvls channels,)?"
    r" (\d+) p2p channels, (\d+) p2p channels per peer"
)
_PEER = re.compile(
    r"^Channel (\d+)(?:/(\d+))? : (\d+)\[\d+\] -> (\d+)\[\d+\]"
    r"(?: \[(send|receive)\])? via (\S.*?)\s*$"
)
_COLLNET = re.compile(r"^CollNet (\d+)/\d+ : (\d+) \[(send|receive)\] via (COLLNET/.+?)\s*$")
_NET_USING = re.compile(r"^NET/(\w+) ?: Using (.*)$")
_NET_DEVICE = re.compile(r"\[\d+\]([^\s\[;]+)")
_TUNING = re.compile(r"^(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}")
_ENV = re.compile(r"^(NCCL_[A-Z0-9_]+) set (?:by environment )?to (.*?)\s*$")
_NET_FROM_LABEL = re.compile(r"^(.+?)/\d+(?:\(\d+\))?(?:/|\(|$)")

# net plugin lines
_PLUGIN_NOT_FOUND = re.compile(r"^NET/Plugin: Could not find:\s*(.*?)\s*$")
_PLUGIN_OPEN_ERR = re.compile(r"^NET/Plugin: (?!Could not find)(.+?\.so(?:\.\d+)*): (.*)$")
_PLUGIN_UNSUPPORTED = re.compile(r"^External network plugin (.+?) is unsupported")
_PLUGIN_LOADED = re.compile(r"^Successfully loaded external network plugin (.+?)\s*$")
_PLUGIN_LOADED_OLD = re.compile(r"^NET/Plugin ?: ?Loaded (?:net )?plugin (.+?)(?: \(v\d+\))?\s*$")
_PLUGIN_NONE_OLD = re.compile(r"^NET/Plugin ?: ?(?:No plugin found|Plugin load returned|Using internal)")
_NET_INIT_OK = re.compile(r"^Initialized NET plugin (.+?)\s*$")
_NET_INIT_FAIL = re.compile(r"^Failed to initialize NET plugin (.+?)\s*$")
_NO_NET_PLUGIN = "Failed to initialize any NET plugin"

_NCCL_RESULT = re.compile(
    r"^\s*(ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidArgument"
    r"|ncclInvalidUsage|ncclRemoteError|ncclInProgress|ncclTimeout)\b:?"
)
_LAST_ERROR = re.compile(r"Last error:\s*(.*?)\s*$")


def normalize_transport(raw: str) -> str:
    """Strip channel/port details from a ``via`` label.

    ``NET/Socket/0/Shared`` -> ``NET/Socket``; ``NET/IB/1(3)/GDRDMA`` -> ``NET/IB``;
    ``P2P/CUMEM/read`` -> ``P2P/CUMEM``; ``P2P/IPC/CE`` -> ``P2P/IPC``;
    ``P2P/direct pointer/read`` -> ``P2P/direct pointer``; ``P2P/indirect/2[2]`` ->
    ``P2P/indirect``; ``SHM/direct/direct`` -> ``SHM``; ``COLLNET/SHARP/0`` -> ``COLLNET/SHARP``.
    """
    s = raw.strip()
    if s.startswith("P2P/"):
        rest = s[4:]
        for kind in ("direct pointer", "CUMEM", "MNNVL", "IPC", "indirect"):
            if rest.startswith(kind):
                return "P2P/" + kind
        return "P2P/" + rest.split("/", 1)[0]
    if s == "SHM" or s.startswith("SHM/"):
        return "SHM"
    for head in ("NET/", "COLLNET/"):
        if s.startswith(head):
            rest = s[len(head):]
            m = _NET_FROM_LABEL.match(rest)
            name = m.group(1) if m else rest.split("/", 1)[0]
            return head + name
    return s.split("/", 1)[0]


def _add_unique(items: list[str], value: str) -> None:
    if value and value not in items:
        items.append(value)


def _clean_version(v: str) -> str:
    return v.rstrip(".;:)")


def parse_nccl_log(text: str) -> NcclLogSummary:
    """Summarise NCCL INFO/WARN lines found anywhere in ``text``."""
    s = NcclLogSummary()
    if not isinstance(text, str) or not text:
        return s
    lines = _ANSI.sub("", text).splitlines()
    fallback_version: Optional[str] = None
    init_started = False
    no_net_plugin = False

    for i, line in enumerate(lines):
        # ---- lines outside NCCL's own prefix (torch's error text, VERSION level)
        if "Last error:" in line and s.last_error is None:
            m = _LAST_ERROR.search(line)
            inline = m.group(1) if m else ""
            if inline:
                s.last_error = inline
            else:
                for nxt in lines[i + 1 : i + 4]:
                    if nxt.strip():
                        s.last_error = nxt.strip()
                        break
        if s.nccl_error is None:
            m = _NCCL_RESULT.match(line)
            if m:
                s.nccl_error = m.group(1)

        mk = _MARKER.search(line)
        if mk is None:
            m = _VERSION.search(line)
            if m:
                if line.lstrip().startswith("NCCL version") and s.nccl_version is None:
                    s.nccl_version = _clean_version(m.group(1))  # VERSION-level line
                elif fallback_version is None:
                    fallback_version = _clean_version(m.group(1))
            continue

        level, msg = mk.group(1), mk.group(2).rstrip()
        s.nccl_lines += 1
        if level == "WARN":
            _add_unique(s.warnings, msg.strip())
            if _NO_NET_PLUGIN in msg:
                no_net_plugin = True
            continue

        # ---- INFO messages
        if msg.startswith("Channel ") or msg.startswith("CollNet "):
            m = _PEER.match(msg)
            if m:
                raw = m.group(6)
                label = normalize_transport(raw)
                s.peers.append(
                    PeerConnection(int(m.group(1)), int(m.group(3)), int(m.group(4)), m.group(5), label)
                )
                s.transports[label] = s.transports.get(label, 0) + 1
                s.transport_details[raw] = s.transport_details.get(raw, 0) + 1
                continue
            m = _COLLNET.match(msg)
            if m:
                raw = m.group(4)
                label = normalize_transport(raw)
                s.peers.append(PeerConnection(int(m.group(1)), int(m.group(2)), None, m.group(3), label))
                s.transports[label] = s.transports.get(label, 0) + 1
                s.transport_details[raw] = s.transport_details.get(raw, 0) + 1
            continue

        m = _VERSION.search(" " + msg)
        if m and msg.startswith("NCCL version"):
            if s.nccl_version is None:
                s.nccl_version = _clean_version(m.group(1))
            continue
        m = _DRIVER.match(msg)
        if m:
            if s.cuda_driver_version is None:
                s.cuda_driver_version = int(m.group(1))
            continue
        m = _NETWORK.match(msg)
        if m:
            if s.network is None:
                s.network = m.group(1)
            continue
        m = _COMM.match(msg)
        if m:
            c = CommInit(m.group(1), *(int(m.group(k)) for k in range(2, 8)))
            s.comms.append(c)
            if s.rank is None:
                s.rank, s.n_ranks, s.n_nodes = c.rank, c.n_ranks, c.n_nodes
                s.local_ranks, s.local_rank, s.mnnvl = c.local_ranks, c.local_rank, c.mnnvl
            continue
        m = _INIT.match(msg)
        if m:
            if m.group(3) == "START":
                init_started = True
            else:
                s.init_complete = True
            continue
        m = _CHANNELS.match(msg)
        if m:
            if s.coll_channels is None:
                g = [None if x is None else int(x) for x in m.groups()]
                s.coll_channels, s.collnet_channels, s.nvls_channels = g[0], g[1], g[2]
                s.p2p_channels, s.p2p_channels_per_peer = g[3], g[4]
            continue
        m = _TUNING.match(msg)
        if m:
            s.tuning.append(TuningChoice(m.group(1), int(m.group(2)), m.group(3), m.group(4), (int(m.group(5)), int(m.group(6)))))
            continue
        m = _NET_USING.match(msg)
        if m:
            devices = [_device_name(m.group(1), d) for d in _NET_DEVICE.findall(m.group(2))]
            if devices:
                s.net_devices.setdefault(m.group(1), devices)
            continue
        m = _ENV.match(msg)
        if m:
            value = m.group(2)
            if re.fullmatch(r"-?\d+\.", value):
                value = value[:-1]
            s.env_lines.setdefault(m.group(1), value)
            continue
        if "plugin" in msg or "Plugin" in msg:
            _plugin_line(s, msg)

    if s.nccl_version is None:
        s.nccl_version = fallback_version
    if s.nccl_version:
        m = _CUDA_SUFFIX.search(s.nccl_version)
        if m:
            s.cuda_version = m.group(1)
    if s.init_complete is None and init_started:
        s.init_complete = False
    if s.last_error and _NO_NET_PLUGIN in s.last_error:
        no_net_plugin = True
    if no_net_plugin and s.net_plugin_loaded is None:
        s.net_plugin_loaded = False
    return s


def _device_name(network: str, raw: str) -> str:
    """``lo:127.0.0.1<0>`` -> ``lo``; ``mlx5_0:1/IB`` -> ``mlx5_0:1`` (device and port)."""
    raw = raw.split("<", 1)[0]
    return raw.split(":", 1)[0] if network == "Socket" else raw.split("/", 1)[0]


def algorithms_used(tuning: Sequence[TuningChoice]) -> dict[str, dict[str, int]]:
    """{"AllReduce": {"RING/SIMPLE": 12, "TREE/LL": 3}}: how often each algorithm/protocol ran per collective."""
    found: dict[str, dict[str, int]] = {}
    for t in tuning:
        key = f"{t.algorithm}/{t.protocol}"
        per = found.setdefault(t.collective, {})
        per[key] = per.get(key, 0) + 1
    return found


def _plugin_line(s: NcclLogSummary, msg: str) -> None:
    m = _PLUGIN_LOADED.match(msg) or _PLUGIN_LOADED_OLD.match(msg)
    if m:
        if not s.net_plugin_loaded:
            s.net_plugin = m.group(1)
        s.net_plugin_loaded = True
        return
    m = _PLUGIN_NOT_FOUND.match(msg) or _PLUGIN_OPEN_ERR.match(msg) or _PLUGIN_UNSUPPORTED.match(msg)
    if m:
        if s.net_plugin is None:
            s.net_plugin = m.group(1)
        if s.net_plugin_loaded is None:
            s.net_plugin_loaded = False
        return
    if _PLUGIN_NONE_OLD.match(msg):
        if s.net_plugin_loaded is None:
            s.net_plugin_loaded = False
        return
    m = _NET_INIT_OK.match(msg)
    if m:
        _add_unique(s.net_plugins_initialized, m.group(1))
        return
    m = _NET_INIT_FAIL.match(msg)
    if m:
        _add_unique(s.net_plugins_failed, m.group(1))


def transport_label(summary: NcclLogSummary) -> str:
    """Short matrix-cell label: network transports first, then the rest.

    Within each group labels are ordered by connection count (desc), then name:
    ``"P2P/CUMEM"``, ``"NET/Socket+P2P/CUMEM"``, ``"NET/Socket"``; ``""`` when no
    connection line was seen.
    """
    counts = summary.transports or {}

    def key(item: tuple[str, int]) -> tuple[int, int, str]:
        name, n = item
        group = 0 if name.startswith("NET/") else 1 if name.startswith("COLLNET/") else 2
        return (group, -n, name)

    return "+".join(name for name, n in sorted(counts.items(), key=key) if n > 0)


def merge(summaries: Sequence[NcclLogSummary]) -> NcclLogSummary:
    """Combine per-rank summaries of one probe.

    Counts and peer lists add up; scalars take the first non-None value; lists
    (warnings, plugin names) are unioned keeping order; env lines keep the first
    value per name.  ``net_plugin_loaded`` is True if any rank loaded one, else
    False if any said no; ``init_complete`` is False if any rank started without
    completing.
    """
    out = NcclLogSummary()
    scalars = (
        "nccl_version", "cuda_version", "cuda_driver_version", "network", "rank",
        "n_ranks", "n_nodes", "local_ranks", "local_rank", "mnnvl", "coll_channels",
        "collnet_channels", "nvls_channels", "p2p_channels", "p2p_channels_per_peer",
        "last_error", "nccl_error",
    )
    for s in summaries:
        if s is None:
            continue
        for name in scalars:
            if getattr(out, name) is None and getattr(s, name) is not None:
                setattr(out, name, getattr(s, name))
        for k, v in s.transports.items():
            out.transports[k] = out.transports.get(k, 0) + v
        for k, v in s.transport_details.items():
            out.transport_details[k] = out.transport_details.get(k, 0) + v
        out.peers.extend(s.peers)
        out.comms.extend(s.comms)
        out.tuning.extend(s.tuning)
        for k, v in s.net_devices.items():
            out.net_devices.setdefault(k, v)
        for w in s.warnings:
            _add_unique(out.warnings, w)
        for p in s.net_plugins_initialized:
            _add_unique(out.net_plugins_initialized, p)
        for p in s.net_plugins_failed:
            _add_unique(out.net_plugins_failed, p)
        for k, v in s.env_lines.items():
            out.env_lines.setdefault(k, v)
        out.nccl_lines += s.nccl_lines
        if s.net_plugin_loaded:
            if not out.net_plugin_loaded:
                out.net_plugin = s.net_plugin
            out.net_plugin_loaded = True
        elif s.net_plugin_loaded is False:
            if out.net_plugin_loaded is None:
                out.net_plugin_loaded = False
            if out.net_plugin is None:
                out.net_plugin = s.net_plugin
        elif out.net_plugin is None and s.net_plugin is not None:
            out.net_plugin = s.net_plugin
        if s.init_complete is False:
            out.init_complete = False
        elif s.init_complete and out.init_complete is None:
            out.init_complete = True
    return out


_DEVICE_PEER = re.compile(r"Channel \d+(?:/(\d+))? : \d+\[([0-9a-fA-F]+)\] -> \d+\[([0-9a-fA-F]+)\](?: \[(?:send|receive)\])? via (\S.*?)\s*$")


def device_pair_transports(text: str) -> dict[tuple[str, str], str]:
    """(sender device, receiver device) -> the transport NCCL connected them with, from ``Channel`` lines.

    The bracket after a rank is its device (cudaDev on NCCL >= 2.19, the PCI bus id before), the same in every
    communicator, so pairs read the same whether torch sent over the world communicator or a two-rank one.
    Point-to-point connections (connection index 1) are taken where the log has them, so the rings of a barrier do
    not count; a pair with several labels gets the one most of its channels used.
    """
    counts: dict[tuple[str, str], dict[str, int]] = {}
    p2p_only = False
    found: list[tuple[Optional[str], str, str, str]] = []
    for line in _ANSI.sub("", text or "").splitlines():
        m = _DEVICE_PEER.search(line)
        if m and "NCCL INFO" in line:
            found.append((m.group(1), m.group(2), m.group(3), normalize_transport(m.group(4))))
            p2p_only = p2p_only or m.group(1) == "1"
    for conn, src, dst, transport in found:
        if p2p_only and conn != "1":
            continue
        per = counts.setdefault((src, dst), {})
        per[transport] = per.get(transport, 0) + 1
    return {pair: max(per, key=lambda t: per[t]) for pair, per in counts.items()}


__all__ = [
    "CommInit",
    "NcclLogSummary",
    "PeerConnection",
    "device_pair_transports",
    "merge",
    "normalize_transport",
    "parse_nccl_log",
    "transport_label",
]
