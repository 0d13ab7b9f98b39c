"""A run under its network condition: its hosts' links shaped around the probe, the proof stored with the result.

Two ways to reach the links, chosen once per command (app/network_axis.py) and handed to the session as a
``Shaper``:
- ``link_shaper``: links this process can reach itself (an emulated cluster's hosts: their namespaces' eth0),
  shaped with ``network.shaping.shaped`` in this process;
- ``launcher_shaper``: a real cluster's hosts, each shaped by ``python -m envmatrix.network.host hold``, started
  by the run's own launcher with one process per node before the probe and told to undo after it (same safety
  rules on each host: check, state file, cleanup).
Both yield what the stored row's ``network`` block holds: name, value, proof text (before/after), sent bytes.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Optional, Sequence

from envmatrix.errors import PlanError
from envmatrix.planning.plan import Run

# (run, its work directory) -> a context manager yielding the run's ShapingRecord, filled by the time it exits
Shaper = Callable[[Run, str], ContextManager["ShapingRecord"]]


@dataclass
class ShapingRecord:
    name: str
    value: str
    condition: dict
    proof: str = ""  # per link: "-- before" (as installed) and "-- after" (statistics at the end, before undo)
    sent_bytes: dict[str, int] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)
    restored: Optional[bool] = None  # every link's saved qdiscs came back byte for byte
    how: str = ""  # "links" | "launcher" | "" (unshaped)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "condition": self.condition, "proof": self.proof,
                "sent_bytes": self.sent_bytes, "links": self.links, "restored": self.restored, "how": self.how}


def record_of(run: Run) -> ShapingRecord:
    c = run.network
    return ShapingRecord(c.name, c.describe(), c.to_json())


@contextlib.contextmanager
def no_shaping(run: Run, workdir: str) -> Iterator[ShapingRecord]:
    """Unshaped conditions, and launchers with no links to shape: nothing is touched."""
    yield record_of(run)


def link_shaper(links_of_nodes: Callable[[int], Sequence[Any]], allow_default_route: bool = False) -> Shaper:
    """Shape ``links_of_nodes(run.grid.nodes)`` (network.shaping Links) in this process."""

    @contextlib.contextmanager
    def shape(run: Run, workdir: str) -> Iterator[ShapingRecord]:
        from envmatrix.network.shaping import shaped

        record = record_of(run)
        record.how = "links"
        with shaped(list(links_of_nodes(run.grid.nodes)), run.network, allow_default_route) as proof:
            yield record
        record.proof = proof.text()
        record.sent_bytes = {str(k): int(v) for k, v in proof.sent_bytes().items()}
        record.links = [lp.link for lp in proof.links]
        record.restored = all(lp.restored for lp in proof.links) if proof.links else None

    return shape


def seat_links(session: Any) -> Callable[[int], list[Any]]:
    """The egress links of the first ``nodes`` of the session's emulated hosts (launcher local with
    ``emulate_hosts: {namespaces: true}``: the namespaces come and go with the session)."""
    from envmatrix.network.shaping import Link

    return lambda nodes: [Link(seat.netns, seat.ifname) for seat in session.host_seats[:nodes]]


def check_links(links: Sequence[Any], conditions: Sequence[Any], allow_default_route: bool) -> None:
    """Refuse, before anything launches, a condition these links cannot take (shaping.check_applicable)."""
    from envmatrix.network.shaping import check_applicable

    for condition in conditions:
        if condition is not None and condition.shaped:
            check_applicable(links, condition, allow_default_route)


HOLD_MODULE = "envmatrix.network.host"


def launcher_shaper(session: Any, interface: str, allow_default_route: bool = False,
                    ready_timeout_s: float = 60.0) -> Shaper:
    """Each node of the run shaped by ``python -m envmatrix.network.host hold`` started through the session's
    launcher (one process per node, the hosts the probe's ranks will use), before the probe; undone after it."""

    @contextlib.contextmanager
    def shape(run: Run, workdir: str) -> Iterator[ShapingRecord]:
        record = record_of(run)
        record.how = "launcher"
        hold_dir = Path(workdir) / "network"
        hold_dir.mkdir(parents=True, exist_ok=True)
        hold_run, plan = _hold_plan(session, run, hold_dir, interface, allow_default_route)
        outcomes: list[Any] = []
        failure: list[BaseException] = []

        def launch() -> None:
            from envmatrix.execution.processes import run_group

            try:
                # not ended by a Ctrl-C: the holds end at ``stop`` with their undo, which the launcher's kill could cut
                outcomes.extend(run_group(plan.processes, timeout_s=float(run.probe.params.get("timeout_s", 600)) + 2 * ready_timeout_s,
                                          interruptible=False))
            except BaseException as exc:  # noqa: BLE001 - reported by the waiting thread
                failure.append(exc)

        thread = threading.Thread(target=launch, name="envmatrix-network-hold", daemon=True)
        thread.start()
        try:
            _wait_ready(hold_dir, run.grid.nodes, thread, ready_timeout_s, outcomes, failure, plan)
            yield record
        finally:
            (hold_dir / "stop").write_text("")
            thread.join(ready_timeout_s)
            proofs = sorted(hold_dir.glob("*.proof.json"))
            texts = []
            unrestored = set()  # a proof whose undo did not finish: its state entry stays for the reap below
            for path in proofs:
                data = json.loads(path.read_text())
                texts.append(f"## host {data['host']}\n{data['text']}")
                record.sent_bytes.update({k: int(v) for k, v in data["sent_bytes"].items()})
                record.links += [f"{data['host']}:{lp['link']}" for lp in data["proof"]["links"]]
                restored = all(lp.get("restored") for lp in data["proof"]["links"])
                if not restored:
                    unrestored.add(path.name.split(".")[0])
                record.restored = restored if record.restored is None else (record.restored and restored)
            # Started, not refused, not late, and no proof (or a proof of an unfinished undo): ended before their
            # undo (the launcher killed, a hold that did not stop within ready_timeout_s), perhaps while installing.
            killed = sorted({p.name.split(".")[0] for p in [*hold_dir.glob("*.started"), *hold_dir.glob("*.ready")]}
                            - {p.name.split(".")[0] for p in [*proofs, *hold_dir.glob("*.refused"), *hold_dir.glob("*.late")]}
                            | unrestored)
            if killed:
                thread.join(ready_timeout_s)  # the launcher's kill and reaping done: no hold installs after the undo
                texts.append(f"## holds ended before their undo: {', '.join(killed)}\n" + _undo_killed(killed))
                record.restored = False
            record.proof = "\n".join(texts)

    return shape


def _undo_killed(killed: Sequence[str], wait_s: float = 10.0) -> str:
    """What killed holds (``<host>-<pid>``) left, removed from here where their links are reachable (an emulated
    cluster's named namespaces) once they are gone; on real hosts their state files stay there for the next
    envmatrix command on each."""
    from envmatrix.network.state import process_start_time, reap_stale

    pids = [int(k.rsplit("-", 1)[1]) for k in killed if k.rsplit("-", 1)[-1].isdigit()]
    deadline = time.monotonic() + wait_s  # the launcher's kill reaches them a moment after it returned
    while any(process_start_time(pid) is not None for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    removed = reap_stale()
    if removed:
        return "undone by the driver: " + "; ".join(removed)
    return "not reachable from here: the next envmatrix command on those hosts removes it"


def _hold_plan(session: Any, run: Run, hold_dir: Path, interface: str, allow_default_route: bool) -> tuple[Run, Any]:
    from envmatrix.engine.launch import free_port
    from envmatrix.env.atoms import Setup
    from envmatrix.launchers.base import LaunchContext
    from envmatrix.planning.grid import Grid

    argv = [sys.executable, "-m", HOLD_MODULE, "hold", "--condition", json.dumps(run.network.to_json()),
            "--dir", str(hold_dir), "--interface", interface,
            "--timeout", str(float(run.probe.params.get("timeout_s", 600)) + 300)]
    if allow_default_route:
        argv.append("--allow-default-route")
    hold_run = Run(f"{run.key}-network", Setup("network-hold"), Grid(run.grid.nodes, 1), run.probe, run.backend,
                   run.launcher)
    ctx = LaunchContext(workdir=str(hold_dir), inherited_env=session.environ, pins=session.pins,
                        rank_argv=tuple(argv), port=free_port(), gpus=session.gpus)
    return hold_run, session.launcher.build(hold_run, ctx)


def _wait_ready(hold_dir: Path, nodes: int, thread: threading.Thread, timeout_s: float, outcomes: list,
                failure: list, plan: Any) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        refused = sorted(hold_dir.glob("*.refused"))
        if refused:
            raise PlanError(f"network shaping refused on a host: {refused[0].read_text().strip()}")
        if len(list(hold_dir.glob("*.ready"))) >= nodes:
            return
        if not thread.is_alive():
            logs = "; ".join(_tail(spec.log_path) for spec in plan.processes)
            raise PlanError(f"network shaping: the per-host command ended before every host was shaped "
                            f"({failure[0] if failure else outcomes}); its output: {logs}")
        if time.monotonic() > deadline:
            raise PlanError(f"network shaping: {len(list(hold_dir.glob('*.ready')))} of {nodes} hosts shaped "
                            f"after {timeout_s:.0f} s; see {hold_dir}")
        time.sleep(0.05)


def _tail(path: str, chars: int = 400) -> str:
    try:
        with open(path, errors="replace") as fh:
            return fh.read()[-chars:].strip().replace("\n", " | ")
    except OSError:
        return ""
