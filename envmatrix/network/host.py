"""``python -m envmatrix.network.host hold``: shape this host's interface for as long as a run's probe runs.

A real cluster's hosts are shaped by the launcher itself: the driver starts this command through the same
mpirun/srun as the probe, one process per node, before the probe. Each process applies the condition with the same
safety rules as everywhere (``shaping.check_applicable``: root, kernel support, never loopback or the default-route
interface unless allowed; the state file; cleanup), says so in the shared run directory, holds until the driver
writes ``stop`` (or it is signalled: Ctrl-C, the launcher's SIGTERM when the driver dies), then undoes it and
writes its proof. Files in ``--dir``, per host (``<hostname>-<pid>``): ``.refused`` (the one-line refusal, exit 2),
``.started`` (before anything is installed), ``.ready`` (installed; the proof before), ``.proof.json``
(ShapingProof.to_json after the undo, with sent bytes), ``.late`` (started after ``stop``: installed nothing).

On an emulated host (a named network namespace, as ``envmatrix cluster`` makes) the link is recorded under the
namespace's name, so the driver's next command in the root namespace removes what a killed hold left, as it does
for its own; on a real host the next envmatrix command there (the next ``hold``, or ``envmatrix network reset``)
does. A kill -9 of the driver ends the holds through their launcher without their undo: that is this case.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from envmatrix.errors import EnvmatrixError
from envmatrix.network import state
from envmatrix.network.conditions import Condition

STOP_FILE = "stop"


def own_namespace_name() -> Optional[str]:
    """The name (under /run/netns) of the network namespace this process runs in; None for an unnamed one (a real
    host's own namespace)."""
    from envmatrix.network import netlink

    try:
        mine = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return None
    for name in netlink.namespaces():
        if netlink.namespace_id(name) == mine:
            return name
    return None


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _raise_interrupt(signum, frame) -> None:  # noqa: ANN001 - signal handler signature
    # Once: Ctrl-C reaches a hold as SIGINT and then as the launcher's SIGTERM, and a second KeyboardInterrupt raised
    # inside the undo left the qdisc installed with a proof saying nothing was restored (1 run in ~8 of the Ctrl-C test)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def hold(condition: Condition, out_dir: Path, interface: str, allow_default_route: bool, timeout_s: float,
         poll_s: float = 0.05) -> int:
    from envmatrix.network import shaping

    me = f"{socket.gethostname()}-{os.getpid()}"
    out_dir.mkdir(parents=True, exist_ok=True)
    # Before anything is installed: a hold killed while it installs is still known to the driver's cleanup.
    _write(out_dir / f"{me}.started", "")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupt)
    removed = state.reap_stale()
    link = shaping.Link(own_namespace_name(), interface)
    try:
        shaping.check_applicable([link], condition, allow_default_route)
    except EnvmatrixError as exc:
        _write(out_dir / f"{me}.refused", f"{socket.gethostname()}: {exc}\n")
        return 2
    if (out_dir / STOP_FILE).exists():
        # Started after the run it shapes had ended (a launch slow enough to outlast a Ctrl-C): shaping now would
        # outlive the driver's cleanup whenever the launcher's kill caught this hold before its undo (CI run 67)
        _write(out_dir / f"{me}.late", "")
        return 0
    proof = None
    try:
        with shaping.shaped([link], condition, allow_default_route) as proof:
            _write(out_dir / f"{me}.ready", json.dumps({"host": socket.gethostname(), "reaped": removed,
                                                         "before": proof.text()}))
            deadline = time.monotonic() + timeout_s
            while not (out_dir / STOP_FILE).exists() and time.monotonic() < deadline:
                time.sleep(poll_s)
    except KeyboardInterrupt:
        pass
    finally:
        if proof is not None:
            data = {"host": socket.gethostname(), "proof": proof.to_json(), "text": proof.text(),
                    "sent_bytes": {f"{socket.gethostname()}:{k}": v for k, v in proof.sent_bytes().items()}}
            _write(out_dir / f"{me}.proof.json", json.dumps(data, default=str))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envmatrix.network.host")
    sub = parser.add_subparsers(dest="command", required=True)
    h = sub.add_parser("hold", help="shape this host's interface until DIR/stop appears or a signal comes")
    h.add_argument("--condition", required=True, help="the condition as JSON (Condition.to_json)")
    h.add_argument("--dir", required=True, type=Path)
    h.add_argument("--interface", required=True)
    h.add_argument("--allow-default-route", action="store_true")
    h.add_argument("--timeout", type=float, default=3600.0, help="undo after this long even without stop")
    args = parser.parse_args(argv)
    condition = Condition.from_json(json.loads(args.condition))
    return hold(condition, args.dir, args.interface, args.allow_default_route, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
