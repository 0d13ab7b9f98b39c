"""Rank side: a pooled rank other than 0 waits until rank 0's rendezvous store listens, asked of the kernel.

Why: pooled ranks start within a millisecond of each other, and torch's client retries a refused connect only after
a backoff of ~0.5-1.5 s, which a rank that came before rank 0 had bound its store paid (1 in 6 pooled 2x1 runs on
the CPU box, benchmarks/throughput.md).
"""

from __future__ import annotations

import time
from typing import Mapping

# netlink sock_diag (linux/sock_diag.h, inet_diag.h, netlink.h): which sockets listen, without touching them
NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST_DUMP, NLMSG_ERROR, NLMSG_DONE, TCP_LISTEN = 4, 20, 0x301, 2, 3, 10


def wait_for_rank0_store(env: Mapping[str, str], limit_s: float = 0.5, every_s: float = 0.002) -> None:
    """Wait (at most ``limit_s``) until rank 0's rendezvous store listens on MASTER_PORT. Pooled ranks share the
    driver's host and network namespace with rank 0, so the kernel's socket table says when it listens; no
    connection is made (a connect to a port nobody holds yet can connect to itself and take the port). Past the
    limit, or where the kernel cannot be asked, torch's own rendezvous goes on as before."""
    port = env.get("MASTER_PORT") or ""
    if not port.isdigit():
        return
    deadline = time.monotonic() + limit_s
    while not port_listening(int(port)) and time.monotonic() < deadline:
        time.sleep(every_s)


def port_listening(port: int) -> bool:
    """Whether a TCP socket of this network namespace listens on ``port`` (IPv4 or IPv6), asked of the kernel's
    socket table through netlink sock_diag (listeners only: a few entries; /proc/net/tcp lists every socket and took
    15 ms a read on a busy box). True when the kernel cannot be asked, so the caller waits for nothing."""
    import struct

    try:
        return _listening_in_socket_table(port)
    except (OSError, AttributeError, struct.error):  # no netlink here (not Linux, a sandbox that refuses it)
        return True


def _listening_in_socket_table(port: int) -> bool:
    import socket
    import struct

    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as sock:
        sock.settimeout(1.0)  # an answer that never ends is no answer (OSError: the caller waits for nothing)
        for family in (socket.AF_INET, socket.AF_INET6):
            # inet_diag_req_v2: family, protocol, ext, pad, states (TCP_LISTEN only), inet_diag_sockid zeroed
            request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << TCP_LISTEN) + bytes(48)
            sock.send(struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST_DUMP, 1, 0) + request)
            while True:
                data, offset = sock.recv(65536), 0
                while offset + 16 <= len(data):
                    length, kind = struct.unpack_from("=IH", data, offset)
                    if kind in (NLMSG_DONE, NLMSG_ERROR) or length < 16:
                        break
                    # inet_diag_msg: family, state, timer, retrans, then the socket id, source port first (big-endian)
                    if struct.unpack_from(">H", data, offset + 16 + 4)[0] == port:
                        return True
                    offset += (length + 3) & ~3
                else:
                    continue  # the dump goes on in the next datagram
                break
    return False
