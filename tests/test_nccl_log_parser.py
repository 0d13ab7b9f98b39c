"""envmatrix.parsers.nccl_log on real NCCL 2.28.9 text recorded on a 4xH200 box.

tests/data/nccl_logs/: NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET, rank 0 of
1 node x 4 ranks, 2 emulated nodes x 2 ranks (NCCL_HOSTID), 4 nodes x 1 rank.
tests/data/h200/*.log: failing probes' rank stderr (torch tracebacks).
Expected numbers below were counted with grep on those files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envmatrix.parsers.nccl_log import (
    NcclLogSummary,
    PeerConnection,
    merge,
    normalize_transport,
    parse_nccl_log,
    transport_label,
)

DATA = Path(__file__).parent / "data"
LOGS = DATA / "nccl_logs"
H200 = DATA / "h200"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


@pytest.fixture(scope="module")
def s1x4() -> NcclLogSummary:
    return parse_nccl_log(_read(LOGS / "h200_1x4_info_rank0.log"))


@pytest.fixture(scope="module")
def s2x2() -> NcclLogSummary:
    return parse_nccl_log(_read(LOGS / "h200_2x2_info_rank0.log"))


@pytest.fixture(scope="module")
def s4x1() -> NcclLogSummary:
    return parse_nccl_log(_read(LOGS / "h200_4x1_info_rank0.log"))


# ---------------------------------------------------------------- common header


@pytest.mark.parametrize("name", ["h200_1x4_info_rank0.log", "h200_2x2_info_rank0.log", "h200_4x1_info_rank0.log"])
def test_header_fields(name: str) -> None:
    s = parse_nccl_log(_read(LOGS / name))
    assert s.nccl_version == "2.28.9+cuda13.0"
    assert s.cuda_version == "13.0"
    assert s.cuda_driver_version == 13000
    assert s.network == "Socket"
    # "NET/Plugin: Could not find: libnccl-net.so": no external plugin loaded
    assert s.net_plugin == "libnccl-net.so"
    assert s.net_plugin_loaded is False
    # "Failed to initialize NET plugin IB" / "Initialized NET plugin Socket"
    assert s.net_plugins_failed == ["IB"]
    assert s.net_plugins_initialized == ["Socket"]
    assert s.env_lines == {"NCCL_SOCKET_IFNAME": "lo"}
    assert s.rank == 0 and s.local_rank == 0 and s.n_ranks == 4 and s.mnnvl == 0
    assert s.init_complete is True
    assert s.warnings == [] and s.last_error is None and s.nccl_error is None
    assert s.nccl_lines == len(_read(LOGS / name).splitlines())  # every line is NCCL INFO


# ---------------------------------------------------------------- 1 node x 4 ranks


def test_1x4_p2p_cumem_only(s1x4: NcclLogSummary) -> None:
    assert (s1x4.n_nodes, s1x4.local_ranks) == (1, 4)
    assert s1x4.transports == {"P2P/CUMEM": 120}
    assert s1x4.transport_details == {"P2P/CUMEM": 120}
    assert not any(k.startswith("NET/") for k in s1x4.transports)
    # 24 ring connections to rank 1 + 32 p2p channels x 3 peers
    assert len(s1x4.peers) == 120
    assert s1x4.peers[0] == PeerConnection(0, 0, 1, None, "P2P/CUMEM")
    assert s1x4.peers[0] == (0, 0, 1, None, "P2P/CUMEM")
    assert {p.dst_rank for p in s1x4.peers} == {1, 2, 3}
    assert sum(p.dst_rank == 1 for p in s1x4.peers) == 24 + 32
    assert max(p.channel for p in s1x4.peers) == 31
    assert (s1x4.coll_channels, s1x4.collnet_channels, s1x4.nvls_channels) == (24, 24, 0)
    assert (s1x4.p2p_channels, s1x4.p2p_channels_per_peer) == (32, 32)
    assert transport_label(s1x4) == "P2P/CUMEM"


# ---------------------------------------------------------------- 2 nodes x 2 ranks


def test_2x2_net_socket_between_nodes_p2p_inside(s2x2: NcclLogSummary) -> None:
    assert (s2x2.n_nodes, s2x2.local_ranks) == (2, 2)
    assert s2x2.transports == {"NET/Socket": 10, "P2P/CUMEM": 4}
    assert s2x2.transport_details == {"NET/Socket/0": 2, "NET/Socket/0/Shared": 8, "P2P/CUMEM": 4}
    assert len(s2x2.peers) == 14
    assert s2x2.peers[0] == (0, 3, 0, "receive", "NET/Socket")
    assert s2x2.peers[2] == (0, 0, 1, None, "P2P/CUMEM")
    assert sum(p.direction == "send" for p in s2x2.peers) == 4
    assert sum(p.direction == "receive" for p in s2x2.peers) == 6
    # P2P goes only to the other local rank (1); NET only to the other node (2, 3)
    assert {p.dst_rank for p in s2x2.peers if p.transport == "P2P/CUMEM"} == {1}
    assert {p.src_rank for p in s2x2.peers if p.direction == "receive"} == {2, 3}
    assert (s2x2.coll_channels, s2x2.collnet_channels, s2x2.nvls_channels) == (2, 2, 0)
    assert (s2x2.p2p_channels, s2x2.p2p_channels_per_peer) == (2, 2)
    assert transport_label(s2x2) == "NET/Socket+P2P/CUMEM"


# ---------------------------------------------------------------- 4 nodes x 1 rank


def test_4x1_net_socket_only(s4x1: NcclLogSummary) -> None:
    assert (s4x1.n_nodes, s4x1.local_ranks) == (4, 1)
    assert s4x1.transports == {"NET/Socket": 19}
    assert s4x1.transport_details == {"NET/Socket/0": 7, "NET/Socket/0/Shared": 12}
    assert sum(p.direction == "send" for p in s4x1.peers) == 9
    assert sum(p.direction == "receive" for p in s4x1.peers) == 10
    assert (s4x1.coll_channels, s4x1.p2p_channels, s4x1.p2p_channels_per_peer) == (2, 2, 2)
    assert transport_label(s4x1) == "NET/Socket"


# ---------------------------------------------------------------- failures (torch stderr)


@pytest.mark.parametrize(
    "stem, last_error",
    [
        ("bad_plugin", "Failed to initialize any NET plugin"),
        ("socket_bad_if_rank0", "Bootstrap : no socket interface found"),
        (
            "collnet_direct",
            "Error : no algorithm/protocol available for function AllReduce with datatype "
            "ncclFloat32. NCCL_ALGO was set to CollNetDirect.",
        ),
        (
            "tree_simple",
            "Error : no algorithm/protocol available for function AllGather with datatype "
            "ncclInt8. NCCL_ALGO was set to Tree. NCCL_PROTO was set to Simple.",
        ),
    ],
)
def test_failure_last_error(stem: str, last_error: str) -> None:
    paths = [H200 / f"{stem}.log"] if stem.endswith("rank0") else sorted(H200.glob(f"{stem}_rank*.log"))
    assert paths
    for path in paths:
        s = parse_nccl_log(_read(path))
        assert s.last_error == last_error
        assert s.nccl_error == "ncclInvalidUsage"
        # no NCCL_DEBUG there: version only from torch's "..., NCCL version 2.28.9"
        assert s.nccl_version == "2.28.9"
        assert s.cuda_version is None
        assert s.warnings == [] and s.transports == {} and s.peers == []
        assert s.nccl_lines == 0
        assert transport_label(s) == ""


def test_bad_plugin_says_no_net_plugin() -> None:
    s = parse_nccl_log(_read(H200 / "bad_plugin_rank0.log"))
    assert s.net_plugin_loaded is False
    assert s.net_plugin is None
    assert s.network is None


def test_socket_bad_if_peer_rank_has_only_torch_text() -> None:
    # rank 1 died waiting on rank 0's TCPStore: no NCCL text at all
    s = parse_nccl_log(_read(H200 / "socket_bad_if_rank1.log"))
    assert s == NcclLogSummary()


# ---------------------------------------------------------------- WARN lines


# NCCL 2.28 src/debug.cc: "[%F %T] " timestamp (default for WARN), "host:pid:tid ",
# "[cudaDev] file:line NCCL WARN ", message.
WARN_TEXT = """\
[2025-11-22 07:50:25] vm:8110:8110 [0] plugin/net.cc:379 NCCL WARN Failed to initialize any NET plugin
vm:8110:8110 [0] NCCL INFO init.cc:1 this INFO line must not become a warning
[rank1]:vm:8111:8111 [1] misc/socket.cc:426 NCCL WARN Net : Connect to 10.0.0.2<43210> failed : Connection refused
[2025-11-22 07:50:26] vm:8110:8110 [0] plugin/net.cc:379 NCCL WARN Failed to initialize any NET plugin
"""


def test_warnings_strip_prefix_and_dedupe() -> None:
    s = parse_nccl_log(WARN_TEXT + _read(H200 / "bad_plugin_rank0.log"))
    assert s.warnings == [
        "Failed to initialize any NET plugin",
        "Net : Connect to 10.0.0.2<43210> failed : Connection refused",
    ]
    assert s.last_error == "Failed to initialize any NET plugin"
    assert s.net_plugin_loaded is False
    assert s.nccl_lines == 4


def test_rootcause_style_warn_line() -> None:
    s = parse_nccl_log("host:123:456 [0] init.cc:1234 NCCL WARN Error: network AWS Libfabric not found.\n")
    assert s.warnings == ["Error: network AWS Libfabric not found."]


# ---------------------------------------------------------------- other 2.28 formats


def test_source_formats_shm_ib_plugin_env() -> None:
    # Lines written from the NCCL 2.28.9 format strings (transport/shm.cc, net.cc,
    # p2p.cc, plugin/net.cc, misc/param.cc, VERSION level).
    text = """\
NCCL version 2.28.9+cuda12.9
h:1:1 [0] NCCL INFO Successfully loaded external network plugin /opt/aws-ofi-nccl/lib/libnccl-net-ofi.so
h:1:1 [0] NCCL INFO Initialized NET plugin AWS Libfabric
h:1:1 [0] NCCL INFO Using network AWS Libfabric
h:1:1 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to 2.
h:1:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple
h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
h:1:1 [0] NCCL INFO Channel 01 : 0[0] -> 1[1] via SHM/CE/direct
h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[2] [send] via NET/AWS Libfabric/0(1)/GDRDMA/Shared
h:1:1 [0] NCCL INFO Channel 00/0 : 3[3] -> 0[0] [receive] via NET/AWS Libfabric/1/GDRDMA(PCI)
h:1:1 [0] NCCL INFO Channel 00/1 : 0[0] -> 1[1] via P2P/IPC/read
h:1:1 [0] NCCL INFO Channel 01/1 : 0[0] -> 1[1] via P2P/direct pointer/read
h:1:1 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA
"""
    s = parse_nccl_log(text)
    assert s.nccl_version == "2.28.9+cuda12.9" and s.cuda_version == "12.9"
    assert s.net_plugin == "/opt/aws-ofi-nccl/lib/libnccl-net-ofi.so"
    assert s.net_plugin_loaded is True
    assert s.network == "AWS Libfabric"
    assert s.env_lines == {"NCCL_NET_GDR_LEVEL": "2", "NCCL_PROTO": "Simple"}
    assert s.transports == {
        "SHM": 2,
        "NET/AWS Libfabric": 2,
        "P2P/IPC": 1,
        "P2P/direct pointer": 1,
        "COLLNET/SHARP": 1,
    }
    assert s.peers[-1] == (0, 0, None, "send", "COLLNET/SHARP")
    assert transport_label(s) == "NET/AWS Libfabric+COLLNET/SHARP+SHM+P2P/IPC+P2P/direct pointer"


@pytest.mark.parametrize(
    "raw, label",
    [
        ("NET/Socket/0", "NET/Socket"),
        ("NET/Socket/0/Shared", "NET/Socket"),
        ("NET/IB/1(3)/GDRDMA(PCI)/Shared", "NET/IB"),
        ("NET/AWS Libfabric/0/GDRDMA", "NET/AWS Libfabric"),
        ("P2P/CUMEM", "P2P/CUMEM"),
        ("P2P/CUMEM/read/CE", "P2P/CUMEM"),
        ("P2P/MNNVL/read", "P2P/MNNVL"),
        ("P2P/IPC/CE", "P2P/IPC"),
        ("P2P/direct pointer/read", "P2P/direct pointer"),
        ("P2P/indirect/2[2]/read", "P2P/indirect"),
        ("SHM/direct/direct", "SHM"),
        ("COLLNET/SHARP/0/GDRDMA", "COLLNET/SHARP"),
    ],
)
def test_normalize_transport(raw: str, label: str) -> None:
    assert normalize_transport(raw) == label


# ---------------------------------------------------------------- robustness


def test_concatenated_ranks_and_interleaved_output() -> None:
    text = "\n".join(
        [
            "/usr/lib/python3/site-packages/torch/__init__.py:1: UserWarning: something",
            _read(LOGS / "h200_2x2_info_rank0.log"),
            _read(H200 / "bad_plugin_rank0.log"),
            _read(LOGS / "h200_4x1_info_rank0.log"),
        ]
    )
    s = parse_nccl_log(text)
    assert s.transports == {"NET/Socket": 29, "P2P/CUMEM": 4}
    assert s.n_nodes == 2  # first comm line wins
    assert [c.n_nodes for c in s.comms] == [2, 4]
    assert s.nccl_version == "2.28.9+cuda13.0"  # NCCL's own line beats torch's
    assert s.last_error == "Failed to initialize any NET plugin"
    assert transport_label(s) == "NET/Socket+P2P/CUMEM"


def test_torchrun_prefix_and_crlf() -> None:
    text = _read(LOGS / "h200_4x1_info_rank0.log").replace("\n", "\r\n")
    text = "".join(f"[rank0]:{line}\n" for line in text.splitlines())
    s = parse_nccl_log(text)
    assert s.transports == {"NET/Socket": 19}
    assert s.n_nodes == 4


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "\x00\x01\x02 binary \xff\xfe",
        "NCCL INFO\nNCCL WARN\nChannel 00/0 : x[y] -> via\ncomm 0x0 rank a nRanks\nLast error:\n",
        "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: nope\n",
        "x" * 100000,
    ],
)
def test_garbage_gives_empty_summary(garbage: str) -> None:
    s = parse_nccl_log(garbage)
    assert s.transports == {} and s.peers == [] and s.warnings == []
    assert s.nccl_version is None and s.n_nodes is None and s.last_error is None
    assert transport_label(s) == ""


def test_non_string_input_is_empty() -> None:
    assert parse_nccl_log(None) == NcclLogSummary()  # type: ignore[arg-type]
    assert parse_nccl_log("") == NcclLogSummary()


# ---------------------------------------------------------------- merge


def test_merge_sums_counts_and_keeps_first_scalars(
    s1x4: NcclLogSummary, s2x2: NcclLogSummary, s4x1: NcclLogSummary
) -> None:
    bad = parse_nccl_log(_read(H200 / "bad_plugin_rank0.log"))
    warn = parse_nccl_log(WARN_TEXT)
    m = merge([s1x4, bad, s2x2, warn, s4x1])
    assert m.transports == {"P2P/CUMEM": 124, "NET/Socket": 29}
    assert m.transport_details == {
        "P2P/CUMEM": 124,
        "NET/Socket/0": 9,
        "NET/Socket/0/Shared": 20,
    }
    assert len(m.peers) == 120 + 14 + 19
    assert m.n_nodes == 1 and m.local_ranks == 4 and m.coll_channels == 24
    assert m.nccl_version == "2.28.9+cuda13.0"
    assert m.last_error == "Failed to initialize any NET plugin"
    assert m.warnings == warn.warnings
    assert m.net_plugin == "libnccl-net.so" and m.net_plugin_loaded is False
    assert m.net_plugins_failed == ["IB"] and m.net_plugins_initialized == ["Socket"]
    assert m.env_lines == {"NCCL_SOCKET_IFNAME": "lo"}
    assert m.init_complete is True
    assert transport_label(m) == "NET/Socket+P2P/CUMEM"
    # inputs untouched
    assert s1x4.transports == {"P2P/CUMEM": 120}


def test_merge_matches_concatenation() -> None:
    texts = [_read(LOGS / n) for n in ("h200_2x2_info_rank0.log", "h200_4x1_info_rank0.log")]
    merged = merge([parse_nccl_log(t) for t in texts])
    concatenated = parse_nccl_log("\n".join(texts))
    assert merged.transports == concatenated.transports
    assert merged.peers == concatenated.peers
    assert merged.n_nodes == concatenated.n_nodes == 2


def test_merge_empty() -> None:
    assert merge([]) == NcclLogSummary()


def test_merge_plugin_loaded_wins() -> None:
    loaded = parse_nccl_log("h:1:1 [0] NCCL INFO Successfully loaded external network plugin libnccl-net-x.so\n")
    missing = parse_nccl_log("h:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net-x.so\n")
    assert missing.net_plugin_loaded is False and missing.net_plugin == "libnccl-net-x.so"
    m = merge([missing, loaded])
    assert m.net_plugin_loaded is True and m.net_plugin == "libnccl-net-x.so"


def test_as_dict_is_json_friendly(s2x2: NcclLogSummary) -> None:
    import json

    d = json.loads(json.dumps(s2x2.as_dict()))
    assert d["transports"] == {"NET/Socket": 10, "P2P/CUMEM": 4}
    assert d["peers"][0] == [0, 3, 0, "receive", "NET/Socket"]
