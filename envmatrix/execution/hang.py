"""Hang diagnosis: what every rank was doing when a run reached its timeout.

Before the harness kills a timed-out run it sends SIGUSR1 to each launched
process (a rank under the local launcher; mpirun/srun forward it to their
ranks, and the shim forwards it to the probe), and each rank's faulthandler
writes all its Python stacks to ``rank{R}.stack``. With NCCL >= 2.24 the RAS
service of a local rank is asked for its status too (``ncclras``'s client
protocol). :func:`diagnose` (pure) turns stacks, progress markers and NCCL log
tails into one line such as ``rank 3 on host h2 stuck in allreduce (seq 17)``.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from envmatrix.boundary import RESULT_DIR_VAR
from envmatrix.execution.processes import children_of, send_signal
from envmatrix.results import compress_ranks
from envmatrix.results import RankResult

STACK_SIGNAL = signal.SIGUSR1
RAS_PORT = 28028  # NCCL_RAS_CLIENT_PORT (src/ras/ras_internal.h)
RAS_CLIENT_PROTOCOL = 2
NCCL_TAIL_LINES = 8
CUDA_SYNC = "cuda-sync"  # blocked in torch.cuda.synchronize: waiting for the collective the marker names

# torch.distributed functions -> the collective names the probe's markers use.
_COLLECTIVE_FUNCS = {
    "all_reduce": "allreduce", "all_gather": "allgather", "all_gather_into_tensor": "allgather",
    "all_to_all_single": "alltoall", "all_to_all": "alltoall", "reduce_scatter": "reducescatter",
    "reduce_scatter_tensor": "reducescatter", "broadcast": "broadcast", "reduce": "reduce",
    "barrier": "barrier", "send": "send", "recv": "recv", "init_process_group": "init",
    "destroy_process_group": "destroy", "monitored_barrier": "barrier",
}
_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+) in (\S+)')
_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+)")


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    func: str

    def short(self) -> str:
        # envmatrix's own frames keep their package directory: "rank/main.py" says which main, "main.py" would not.
        path = self.path.replace(os.sep, "/")
        name = path.rsplit("/envmatrix/", 1)[1] if "/envmatrix/" in path else os.path.basename(path)
        return f"{name}:{self.line} in {self.func}"


def parse_stacks(text: str) -> list[list[Frame]]:
    """faulthandler's dump -> one frame list per thread, innermost frame first (as it prints them)."""
    threads: list[list[Frame]] = []
    for line in text.splitlines():
        if _THREAD.match(line):
            threads.append([])
            continue
        m = _FRAME.match(line)
        if m and threads:
            threads[-1].append(Frame(m.group(1), int(m.group(2)), m.group(3)))
    return [t for t in threads if t]


def _is_torch_distributed(frame: Frame) -> bool:
    return "torch/distributed" in frame.path.replace(os.sep, "/")


def where_stuck(stacks: Sequence[Sequence[Frame]]) -> tuple[Optional[str], Optional[Frame]]:
    """(collective the rank blocks in, or None; the innermost frame outside torch of the busiest thread).

    The thread that runs the probe is the one whose outermost frame is not a thread bootstrap."""
    main = [t for t in stacks if t and t[-1].func not in ("_bootstrap", "_bootstrap_inner")] or list(stacks)
    if not main:
        return None, None
    frames = main[0]
    collective = next((_COLLECTIVE_FUNCS[f.func] for f in frames if _is_torch_distributed(f) and f.func in _COLLECTIVE_FUNCS), None)
    if collective is None and any(f.func == "synchronize" and "/torch/cuda/" in f.path.replace(os.sep, "/") for f in frames):
        # NCCL collectives return at once; a rank whose peer never joined blocks in the next CUDA sync
        collective = CUDA_SYNC
    own = next((f for f in frames if not _is_torch_distributed(f) and "/torch/" not in f.path), frames[0])
    return collective, own


def nccl_tail(log: str, lines: int = NCCL_TAIL_LINES) -> list[str]:
    """The last NCCL lines of one rank's log."""
    found = [line.rstrip() for line in log.splitlines() if "NCCL " in line]
    return found[-lines:]


@dataclass
class RankState:
    rank: int
    host: str
    alive: bool  # still running at the timeout
    marker: Optional[str]  # collective named by the probe's progress marker
    seq: Optional[int]
    collective: Optional[str]  # collective the stack blocks in
    frame: Optional[Frame]
    has_stack: bool
    phase: Optional[str] = None  # last phase the rank reported (import, init, collectives, ...)
    launched: bool = False  # the marked collective returned to Python (enqueued, for NCCL) before the rank blocked

    @property
    def waiting(self) -> bool:
        """Blocked in a collective, or past the call of an asynchronous one (NCCL returns at once; the rank
        then waits on its result in a sync, an .item() or a work.wait() outside torch.distributed)."""
        return bool(self.collective and self.collective != "destroy") or (self.launched and not self.collective)

    def label(self) -> str:
        if self.collective == "init" or (not self.collective and not self.marker and self.phase == "init"):
            return "init_process_group (rendezvous)"
        # a bench marker ("allreduce@1048576") says more than the stack's "allreduce" when the two agree
        marked = self.marker if self.marker and self.marker.split("@")[0] in (self.collective, CUDA_SYNC) else None
        marked = marked or (self.marker if self.collective == CUDA_SYNC else None)
        name = marked or self.collective or self.marker
        if name is None:
            return f"phase {self.phase}" if self.phase else "an unknown place"
        return f"{name} (seq {self.seq})" if self.seq is not None else name


def rank_state(rank: RankResult, stack_text: str) -> RankState:
    collective, frame = where_stuck(parse_stacks(stack_text))
    progress = rank.progress or {}
    seq = progress.get("seq")
    return RankState(rank.rank, rank.hostname or f"node{rank.node}", rank.killed_by == "timeout",
                     progress.get("collective"), int(seq) if seq is not None else None, collective, frame,
                     bool(stack_text.strip()), rank.phase, bool(progress.get("launched")))


def _behind(s: RankState) -> tuple[int, int]:
    return (s.seq if s.seq is not None else -1, s.rank)


def _culprit(states: Sequence[RankState], behind_per_nccl: Optional[int] = None) -> RankState:
    """The rank that explains the others, in this order: the one NCCL's RAS counts fewest launched operations
    for (NCCL's own account); one that could not even run its signal handler (stopped, or wedged in native
    code) while peers answered; one that never got past the call of the collective its peers wait in; the
    one furthest behind (lowest sequence number); the lowest rank."""
    named = [s for s in states if s.rank == behind_per_nccl]
    if named:
        return named[0]
    answered = [s for s in states if s.has_stack]
    silent = [s for s in states if not s.has_stack]
    if answered and silent:
        return min(silent, key=_behind)
    waiting = [s for s in answered if s.waiting]
    outside = [s for s in answered if not s.waiting and not s.collective]
    if waiting and outside:
        return min(outside, key=_behind)
    return min(states, key=_behind)


def culprit_of(states: Sequence[RankState], ras_counts: Optional[Mapping[int, int]] = None) -> Optional[RankState]:
    """The live rank that explains the others (_culprit), or None when no rank was still running."""
    alive = [s for s in states if s.alive]
    return _culprit(alive, ras_behind(ras_counts or {}, len(states))) if alive else None


def summary_line(states: Sequence[RankState], ras_counts: Optional[Mapping[int, int]] = None) -> Optional[str]:
    """One line: the culprit rank, where it is stuck, and where the others wait (and NCCL RAS's operation
    counts when it found them differ)."""
    culprit = culprit_of(states, ras_counts)
    if culprit is None:
        return None
    alive = [s for s in states if s.alive]
    behind = ras_behind(ras_counts or {}, len(states))
    if not culprit.has_stack and any(s.has_stack for s in alive):
        head = (f"rank {culprit.rank} on host {culprit.host} did not answer the stack request (stopped, or wedged "
                f"outside Python) in {culprit.label()}")
    elif culprit.has_stack and not culprit.collective and culprit.launched:
        head = f"rank {culprit.rank} on host {culprit.host} stuck waiting for the result of {culprit.label()}"
    elif culprit.has_stack and not culprit.collective and culprit.frame is not None:
        head = f"rank {culprit.rank} on host {culprit.host} stuck outside any collective at {culprit.frame.short()}"
        if culprit.marker:
            head += f", before {culprit.label()}"
    else:
        head = f"rank {culprit.rank} on host {culprit.host} stuck in {culprit.label()}"
    groups: dict[str, list[int]] = {}
    for s in alive:
        if s is not culprit:
            groups.setdefault(s.label(), []).append(s.rank)
    parts = [head] + [f"rank{'s' if len(r) > 1 else ''} {compress_ranks(r)} wait in {where}" for where, r in groups.items()]
    done = [s.rank for s in states if not s.alive]
    if done:
        parts.append(f"rank{'s' if len(done) > 1 else ''} {compress_ranks(done)} no longer running")
    if not any(s.has_stack for s in alive):
        parts.append("no rank answered the stack request")
    if behind is not None:
        parts.append("NCCL RAS: " + ", ".join(
            f"rank {r} {'launched no operation' if n == 0 else f'launched up to operation {n}'}"
            for r, n in sorted(ras_counts.items(), key=lambda kv: (kv[1], kv[0]))))
    return "; ".join(parts)


def diagnose(ranks: Sequence[RankResult], stacks: Mapping[int, str], logs: Mapping[int, str],
             ras: Optional[str] = None) -> dict[str, Any]:
    """The ``hang`` block of a timed-out ProbeResult (pure)."""
    states = [rank_state(r, stacks.get(r.rank, "")) for r in ranks]
    per_rank = {}
    for rank, state in zip(ranks, states):
        per_rank[str(rank.rank)] = {
            "host": state.host, "alive": state.alive, "progress": rank.progress or {},
            "collective": state.collective, "frame": state.frame.short() if state.frame else None,
            "stack": stacks.get(rank.rank, "")[-6000:], "nccl_tail": nccl_tail(logs.get(rank.rank, "")),
        }
    counts = ras_operation_counts(ras or "")
    block: dict[str, Any] = {"line": summary_line(states, counts), "ranks": per_rank}
    culprit = culprit_of(states, counts)
    if culprit is not None:  # the root cause's rank and host (engine.launch), as the line names them
        block["culprit"] = {"rank": culprit.rank, "host": culprit.host}
    if ras is not None:
        block["ras"] = ras[-20000:]
        block["ras_line"] = ras_summary(ras)
        block["ras_operation_counts"] = {str(r): n for r, n in counts.items()}
    return block


# ----------------------------------------------------------------------------- NCCL RAS (>= 2.24)


def ras_address(env: Mapping[str, str]) -> tuple[str, int]:
    """NCCL_RAS_ADDR (host:port) or NCCL's default localhost:28028."""
    raw = (env.get("NCCL_RAS_ADDR") or "").strip()
    if raw and ":" in raw:
        host, _, port = raw.rpartition(":")
        try:
            return host.strip("[]") or "127.0.0.1", int(port)
        except ValueError:
            pass
    return "127.0.0.1", RAS_PORT


def query_ras(host: str, port: int, timeout_s: float = 3.0, connect: Callable[..., Any] = socket.create_connection) -> Optional[str]:
    """The RAS status text (the ``ncclras`` client's exchange: CLIENT PROTOCOL, TIMEOUT, STATUS), or None
    when nothing answers there as a RAS server would."""
    try:
        with connect((host, port), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            reader = sock.makefile("rb")
            sock.sendall(f"CLIENT PROTOCOL {RAS_CLIENT_PROTOCOL}\n".encode())
            if not reader.readline().upper().startswith(b"SERVER PROTOCOL "):
                return None
            sock.sendall(f"TIMEOUT {max(1, int(timeout_s))}\n".encode())
            if reader.readline().strip().upper() != b"OK":
                return None
            sock.sendall(b"STATUS\n")
            sock.settimeout(timeout_s * 2 + 2)  # the server waits up to TIMEOUT for its peers
            return reader.read().decode(errors="replace")
    except OSError:
        return None


def ras_summary(text: str) -> Optional[str]:
    """RAS's own findings: the entries of its ``Errors`` and ``Warnings`` sections (a title underlined with
    ``=``, src/ras/client_support.cc), one ``; `` apart; None when both are empty."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    entries: list[str] = []
    section = None
    for i, line in enumerate(lines):
        underline = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and underline.strip() and set(underline.strip()) <= set("=-"):
            section = line.strip().upper()
            continue
        if section not in ("ERRORS", "WARNINGS") or not line.strip() or set(line.strip()) <= set("=-"):
            continue
        if line.startswith((" ", "\t")) and entries:
            entries[-1] += (": " if ":" not in entries[-1] else " ") + line.strip()
        else:
            entries.append(line.strip())
    return "; ".join(entries[:6]) or None


_RAS_LAUNCHED = re.compile(r"^\s*Rank (\d+) has (?:launched up to operation (\d+)|not launched any operations?)", re.M)


def ras_operation_counts(text: str) -> dict[int, int]:
    """RAS's per-rank operation counts of the first communicator it reports a count MISMATCH for
    ("Rank 0 has launched up to operation 1", "Rank 1 has not launched any operations"; 0 = none)."""
    counts: dict[int, int] = {}
    for entry in re.split(r"\n(?=\S)", text):
        title = entry.strip().splitlines()[0] if entry.strip() else ""
        if "MISMATCH" not in title:
            continue
        for m in _RAS_LAUNCHED.finditer(entry):
            counts[int(m.group(1))] = int(m.group(2)) if m.group(2) else 0
        if counts:
            return counts
    return counts


def ras_behind(counts: Mapping[int, int], world: int) -> Optional[int]:
    """The rank with the fewest launched operations, when RAS counted exactly one such rank of a
    communicator as large as the run (its ranks are then the run's ranks)."""
    if len(counts) != world or len(set(counts.values())) < 2:
        return None
    fewest = min(counts.values())
    behind = [r for r, n in counts.items() if n == fewest]
    return behind[0] if len(behind) == 1 else None


def nccl_at_least(version: Optional[str], major: int, minor: int) -> bool:
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (major, minor)


# ----------------------------------------------------------------------------- at the timeout (processes)


def _probe_of_run(pid: int, workdir: str) -> bool:
    """Whether ``pid`` is a process on this host that runs in this run's result dir (its environment says
    so): a reused pid, or a rank on another host, is never signalled."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:
        return False
    return f"{RESULT_DIR_VAR}={workdir}".encode() in env


class StackRequest:
    """``run_group``'s on_timeout hook: ask every rank for its stacks and wait until the ones still
    running have written them (or ``wait_s`` passes), then record the RAS status when asked to.

    The request goes through the launcher (mpirun/srun forward SIGUSR1, the shim passes it on). A rank
    that has not answered after half of ``wait_s`` and runs on this host is signalled directly at the pid
    its progress report names, so a launcher that does not forward the signal still yields its stack;
    ``direct`` lists those ranks (evidence of where the forwarding chain broke)."""

    def __init__(self, workdir: str, ranks: Iterable[int], wait_s: float = 5.0,
                 ras_address: Optional[tuple[str, int]] = None, forwards: bool = True) -> None:
        self.workdir, self.ranks, self.wait_s, self.ras_address = workdir, tuple(ranks), wait_s, ras_address
        self.forwards = forwards  # False: the launched process would die of SIGUSR1; signal its children (the shims)
        self.ras: Optional[str] = None
        self.fired = False
        self.direct: list[int] = []

    def path(self, rank: int) -> str:
        return os.path.join(self.workdir, f"rank{rank}.stack")

    def _answered(self) -> bool:
        for rank in self.ranks:
            try:
                if os.path.getsize(self.path(rank)) > 0:
                    continue
            except OSError:
                pass  # no stack file: the rank never started its probe; nothing to wait for
            else:
                if not self._finished(rank):
                    return False
        return True

    def _unanswered(self) -> list[int]:
        def empty(rank: int) -> bool:
            try:
                return os.path.getsize(self.path(rank)) == 0
            except OSError:
                return False
        return [r for r in self.ranks if empty(r) and not self._finished(r)]

    def _signal_directly(self) -> None:
        import json

        for rank in self._unanswered():
            try:
                with open(os.path.join(self.workdir, f"rank{rank}.json")) as fh:
                    pid = int(json.load(fh)["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if _probe_of_run(pid, self.workdir):
                send_signal([pid], STACK_SIGNAL)
                self.direct.append(rank)

    def _finished(self, rank: int) -> bool:
        try:
            with open(os.path.join(self.workdir, f"rank{rank}.json")) as fh:
                return '"phase": "done"' in fh.read()
        except OSError:
            return True

    def __call__(self, pids: list[int]) -> None:
        self.fired = True
        send_signal(pids if self.forwards else children_of(pids), STACK_SIGNAL)
        start = time.monotonic()
        deadline, direct_at = start + self.wait_s, start + self.wait_s / 2
        if self.ras_address is not None:
            self.ras = query_ras(*self.ras_address, timeout_s=min(3.0, self.wait_s))
        signalled_directly = False
        while time.monotonic() < deadline and not self._answered():
            if not signalled_directly and time.monotonic() >= direct_at:
                signalled_directly = True
                self._signal_directly()
            time.sleep(0.05)

    def stacks(self) -> dict[int, str]:
        found = {}
        for rank in self.ranks:
            try:
                with open(self.path(rank), errors="replace") as fh:
                    found[rank] = fh.read()
            except OSError:
                continue
        return found
