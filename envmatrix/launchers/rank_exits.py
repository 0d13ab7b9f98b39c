"""The launcher's own account of which rank failed, how, and where; pure.

mpirun, srun and torchrun run many ranks under one launcher process: its exit code says a rank failed,
not which. A rank that dies before it writes its result leaves only the launcher's words, so this reads
them (first observed failure first, as torch elastic's "Root Cause" block does):

- OpenMPI 4.1: ``Process name: [[JOBID,1],RANK]`` + ``Exit code: N``; ``mpirun noticed that process rank R
  with PID P on node H exited on signal 11 (Segmentation fault).``
- Slurm: ``srun: error: HOST: task 1: Segmentation fault`` / ``tasks 0-1: Exited with exit code 3``
- torchrun: the ``Root Cause (first observed failure)`` block, then ``Failures`` (host, rank, exitcode)

Tested on real output recorded here (tests/data/launcher_failures/*_rank1_*.txt).
"""

from __future__ import annotations

import re
import signal as _signal
from dataclasses import dataclass, replace
from typing import Mapping, Optional, Sequence

from envmatrix.execution.processes import ProcessOutcome


@dataclass(frozen=True)
class RankExit:
    rank: int
    exit_code: Optional[int]
    signal: Optional[str]  # "SIGSEGV"
    host: Optional[str]
    launcher: str
    # Said by the rank's own shim when its probe ended by itself (not the launcher's account): true even of a run
    # the driver later killed at its timeout (:func:`rank_outcome`).
    from_shim: bool = False
    # Said after a shim of the same launcher passed on the driver's stack request: the probe was still running at
    # the driver's deadline (the request is sent then, and only then), so it ended during the timeout's kill.
    after_stack_request: bool = False

    def line(self) -> str:
        how = f"died on {self.signal}" if self.signal else f"exited with code {self.exit_code}"
        where = f" on host {self.host}" if self.host else ""
        return f"{self.launcher}: rank {self.rank}{where} {how}"


def _signal_name(number: Optional[int] = None, description: Optional[str] = None) -> Optional[str]:
    for sig in _signal.Signals:
        if number is not None and sig.value == number:
            return sig.name
        if description is not None and (_signal.strsignal(sig) or "").lower() == description.strip().lower():
            return sig.name
    return None


# --------------------------------------------------------------------------- the launcher shim (every shim launcher)

SHIM_EXIT_PREFIX = "envmatrix shim:"
_SHIM_EXIT = re.compile(r"^envmatrix shim: rank (\d+) on host (\S+): probe (?:exited with code (\d+)|died on (SIG\w+))\s*$",
                        re.MULTILINE)


def shim_exit_line(rank: int, host: str, exit_code: Optional[int], signal: Optional[str]) -> str:
    """What the shim says in its launcher's output when its rank's probe ended by itself (read by :func:`shim`)."""
    how = f"died on {signal}" if signal else f"exited with code {exit_code}"
    return f"{SHIM_EXIT_PREFIX} rank {rank} on host {host}: probe {how}"


def shim_stack_request_line(signum: int, probe_pid: int) -> str:
    """The shim's word when it passes the driver's stack request to its probe (launchers/shim.py, forward())."""
    return f"{SHIM_EXIT_PREFIX} passing signal {signum} (stack request) to probe pid {probe_pid}"


_SHIM_STACK_REQUEST = re.compile(r"^envmatrix shim: passing signal \d+ \(stack request\)", re.MULTILINE)


def shim(text: str, launcher: str) -> list[RankExit]:
    """Each rank whose probe ended by itself, in the order its shim said so, exit 0 included (the rank passed);
    marked when it said so after the stack request the driver sends at its deadline."""
    request = _SHIM_STACK_REQUEST.search(text)
    deadline_at = request.start() if request else len(text) + 1
    return [RankExit(int(m.group(1)), int(m.group(3)) if m.group(3) else None, m.group(4), m.group(2), launcher, True,
                     m.start() > deadline_at)
            for m in _SHIM_EXIT.finditer(text)]


# --------------------------------------------------------------------------- OpenMPI 4.1

_OMPI_NAME = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]")
_OMPI_FIELD = re.compile(r"^\s*(Exit code|Node|Host|Hostname):\s*(\S+)", re.MULTILINE)
_OMPI_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")
_OMPI_BLOCK_END = re.compile(r"^\s*-{5,}\s*$", re.MULTILINE)


def openmpi(text: str) -> list[RankExit]:
    found: list[tuple[int, RankExit]] = []
    for match in _OMPI_NAME.finditer(text):
        end = _OMPI_BLOCK_END.search(text, match.end())
        fields = dict((m.group(1), m.group(2)) for m in _OMPI_FIELD.finditer(text[match.end(): end.start() if end else None]))
        code = fields.get("Exit code")
        host = fields.get("Node") or fields.get("Host") or fields.get("Hostname")
        found.append((match.start(), RankExit(int(match.group(1)), int(code) if code and code.lstrip("-").isdigit() else None,
                                              None, host, "mpirun")))
    for match in _OMPI_SIGNAL.finditer(text):
        found.append((match.start(), RankExit(int(match.group(1)), None, _signal_name(int(match.group(3))),
                                              match.group(2), "mpirun")))
    return [exit_ for _, exit_ in sorted(found, key=lambda item: item[0])]


# --------------------------------------------------------------------------- Slurm srun

_SRUN = re.compile(r"srun: error: ([\w.-]+): tasks? ([\d,\-]+): (.+)$", re.MULTILINE)
_SRUN_EXIT = re.compile(r"Exited with exit code (\d+)")


def _task_ids(spec: str) -> list[int]:
    ids: list[int] = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        ids += range(int(low), int(high or low) + 1)
    return ids


def slurm(text: str) -> list[RankExit]:
    exits = []
    for match in _SRUN.finditer(text):
        how = match.group(3).strip()
        code = _SRUN_EXIT.search(how)
        sig = None if code else _signal_name(description=how)
        if code is None and sig is None:
            continue  # a launch failure line (launchers.failures reads those)
        for rank in _task_ids(match.group(2)):
            exits.append(RankExit(rank, int(code.group(1)) if code else None, sig, match.group(1), "srun"))
    return exits


# --------------------------------------------------------------------------- torchrun (torch elastic)

_ELASTIC_ENTRY = re.compile(
    r"host\s*:\s*(\S+)\s*\n\s*rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)", re.MULTILINE
)


def torchrun(text: str) -> list[RankExit]:
    root = text.find("Root Cause (first observed failure)")
    # the root cause block first, then the other failures in the order printed
    sections = [text[root:], text[:root]] if root >= 0 else [text]
    exits, seen = [], set()
    for section in sections:
        for match in _ELASTIC_ENTRY.finditer(section):
            rank, code = int(match.group(2)), int(match.group(3))
            if rank in seen:
                continue
            seen.add(rank)
            exits.append(RankExit(rank, code if code >= 0 else None, _signal_name(-code) if code < 0 else None,
                                  match.group(1), "torchrun"))
    return exits


def rank_exits(launcher: str, text: str) -> list[RankExit]:
    """The ranks launcher ``launcher``'s output ``text`` says failed, first observed first; [] when it names none.

    Each launcher says which parser reads its output (its ``Launcher.rank_exits`` hook)."""
    from envmatrix.launchers.base import get_launcher

    return get_launcher(launcher).rank_exits(text)


# --------------------------------------------------------------------------- combining with a rank's own record

# How a launcher stops the other ranks once one failed (srun --kill-on-bad-exit, torch elastic): effects, not causes.
_STOP_SIGNALS = ("SIGTERM", "SIGKILL")


def account_of(exits: Sequence[RankExit]) -> dict[int, tuple[int, RankExit]]:
    """rank -> (position in the launcher's account, its exit); the first a launcher names for a rank counts."""
    account: dict[int, tuple[int, RankExit]] = {}
    for order, exit_ in enumerate(exits):
        account.setdefault(exit_.rank, (order, exit_))
    return account


def rank_outcome(hosting: ProcessOutcome, rank: int, account: Mapping[int, tuple[int, RankExit]],
                 has_verdict: bool) -> ProcessOutcome:
    """How rank ``rank`` ended, when the process ``hosting`` it runs many ranks and ``account`` is its launcher's word.

    A rank the launcher names gets the exit code/signal named for it, ordered as named (first observed first);
    one it does not name was stopped after another failed. A rank with a verdict of its own keeps it (its
    hosting process's exit status is not its own). Timeouts and launch errors stay the driver's.
    """
    if not account or hosting.launch_error:
        return hosting
    named = account.get(rank)
    if hosting.killed_by:
        # The driver killed the launcher (timeout): a rank whose shim said its probe had ended by itself before the
        # driver's deadline ended so before the kill (a rank that passed is not one of those that hung). A SIGKILL
        # may be the driver's own kill reaching the probe an instant before its shim, so it is no such word; nor is
        # an end said after the stack request: the driver kills its launchers one after another, and a rank under
        # one not yet killed sees its peers under the first die (gloo: "Connection closed by peer") and exits 1 by
        # itself (CI run 90, torchrun 2x2: rank 3 so made a hang a collective_error). Alive at the deadline is a
        # timeout, as the local launcher, one process per rank, counts it.
        if named is None or not named[1].from_shim or named[1].signal == "SIGKILL" or named[1].after_stack_request:
            return hosting
        return replace(hosting, exit_code=named[1].exit_code, signal=named[1].signal, killed_by=None)
    if named is not None:
        order, exit_ = named
        stopped = order > 0 and exit_.signal in _STOP_SIGNALS
        return replace(hosting, exit_code=exit_.exit_code, signal=exit_.signal,
                       killed_by="peer_failure" if stopped else None, ended_at=hosting.ended_at + order * 1e-3)
    if has_verdict:
        return replace(hosting, exit_code=None, signal=None)
    # stopped: the hosting process's exit code or signal is the failed rank's, not this one's
    return replace(hosting, exit_code=None, signal=None, killed_by="peer_failure")
