"""``python -m envmatrix.execution.netns_enter NETNS [--hostname H] -- ARGV...``: ARGV inside a namespace.

What ``ip netns exec NETNS unshare --uts sh -c 'hostname H; ...'`` does, without iproute2: join the named
network namespace, take a private mount namespace with /sys remounted for it and /etc/netns/NETNS/* bound over
/etc (its own /etc/hosts), optionally a UTS namespace with its own hostname, then exec ARGV.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys

from envmatrix.execution import processes
from envmatrix.execution.netns import ETC_NETNS_DIR, NETNS_DIR

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWNET = 0x00020000, 0x04000000, 0x40000000
MS_BIND, MS_REC, MS_SLAVE = 4096, 16384, 1 << 19
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def enter(netns: str, hostname: str | None) -> None:
    fd = os.open(os.path.join(NETNS_DIR, netns), os.O_RDONLY)
    try:
        _check(_libc.setns(fd, CLONE_NEWNET), f"setns {netns}")
    finally:
        os.close(fd)
    _check(_libc.unshare(CLONE_NEWNS | (CLONE_NEWUTS if hostname else 0)), "unshare")
    # Our mounts must not propagate back to the host's mount namespace.
    _check(_libc.mount(b"", b"/", None, MS_SLAVE | MS_REC, None), "make / a slave mount")
    # /sys shows the namespace's own interfaces only when mounted from inside it (best effort, as ip does).
    if _libc.umount2(b"/sys", MNT_DETACH) == 0:
        _libc.mount(netns.encode(), b"/sys", b"sysfs", 0, None)
    etc = os.path.join(ETC_NETNS_DIR, netns)
    if os.path.isdir(etc):
        for name in sorted(os.listdir(etc)):
            target = os.path.join("/etc", name)
            if os.path.exists(target):
                _check(_libc.mount(os.path.join(etc, name).encode(), target.encode(), b"none", MS_BIND, None),
                       f"bind {etc}/{name} over {target}")
    if hostname:
        socket.sethostname(hostname)


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") < 1 or argv.index("--") == len(argv) - 1:
        print("usage: python -m envmatrix.execution.netns_enter NETNS [--hostname H] -- ARGV...", file=sys.stderr)
        return 2
    head, command = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    netns, hostname = head[0], None
    if len(head) == 3 and head[1] == "--hostname":
        hostname = head[2]
    elif len(head) != 1:
        print(f"netns_enter: unexpected arguments {head[1:]}", file=sys.stderr)
        return 2
    try:
        enter(netns, hostname)
        processes.exec_replace(command)
    except OSError as exc:
        print(f"netns_enter: {netns}: {exc}", file=sys.stderr)
        return 127 if exc.errno == 2 else 126  # the shell's codes: not found, cannot run
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
