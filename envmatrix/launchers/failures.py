"""Launcher-level failures: the launcher (mpirun, mpiexec, srun) could not start or keep its ranks; pure.

A daemon that cannot start or connect back, an unreachable host, a launcher refusing the request: no
rank ever ran, so the ranks' own logs say nothing and the last line of the launcher's output is a
banner (``-----``). This reads the launcher's output for the message that names the host and says what
happened, as one line. Tested on recorded launcher output and on the namespace cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from envmatrix.probes.rootcause import is_banner


@dataclass(frozen=True)
class LauncherFailure:
    launcher: str
    host: Optional[str]  # the host the launcher names, when it names one
    message: str  # the launcher's own words, one line

    def line(self) -> str:
        where = f" on host {self.host}" if self.host else ""
        return f"{self.launcher} failed{where}: {self.message}"


def _lines(text: str) -> list[str]:
    return [ln.rstrip() for ln in text.splitlines() if ln.strip() and not is_banner(ln)]


def _field(text: str, name: str) -> Optional[str]:
    match = re.search(rf"^\s*{name}\s*:\s*(\S+)", text, re.MULTILINE)
    return match.group(1) if match else None


# --------------------------------------------------------------------------- OpenMPI (ORTE / PRRTE)

_ORTE_START = "ORTE was unable to reliably start one or more daemons"
_DAEMON_FAILED = "An ORTE daemon has unexpectedly failed after launch and before communicating back to mpirun"
_LOST = "ORTE has lost communication with a remote daemon"
_TCP = "A process or daemon was unable to complete a TCP connection"
_SLOTS = re.compile(r"There are not enough slots available in the system to satisfy the (\d+)")
# mpirun mapped no rank: every node of the allocation is full (e.g. --host names that all resolve to this machine)
_FILLED = "All nodes which are allocated for this job are already filled."
# An ssh (or plm_rsh_agent) complaint printed before ORTE's banner: it is what names the host.
_AGENT = re.compile(r"^(?:ssh|rsh|[\w.-]+ agent|bash|sh): .*?(?:host(?:name)?|node)\s+'?([\w.-]+)'?", re.IGNORECASE)
_PERMISSION = re.compile(r"^(\S+): Permission denied \((.*)\)")
# ORTE ends a failed allocation (a hostfile it cannot open or parse) with this block, whose last line is
# "This is something that should be reported to the developers."; the block before it says what went wrong.
_INTERNAL = "An internal error has occurred in ORTE"


def _blocks(text: str) -> list[str]:
    """The messages OpenMPI frames in ``-----`` banners, each as one line."""
    blocks, current = [], []
    for line in text.splitlines() + ["-" * 5]:
        if is_banner(line):
            if current:
                blocks.append(" ".join(current))
            current = []
        elif line.strip():
            current.append(line.strip())
    return blocks


def openmpi(text: str) -> Optional[tuple[Optional[str], str]]:
    lines = _lines(text)
    slots = _SLOTS.search(text)
    if slots:
        return None, f"not enough slots for the {slots.group(1)} ranks requested (mpirun refused the launch)"
    if _FILLED in text:
        return None, f"{_FILLED} (mpirun mapped no rank; check that the --host names are distinct nodes and that no OMPI_MCA_plm=isolated keeps mpirun on this host)"
    if _TCP in text:
        local, remote = _field(text, "Local host"), _field(text, "Remote host")
        return local, f"daemon on {local} could not open a TCP connection back to {remote} ({_ORTE_START if _ORTE_START in text else _TCP})"
    if _LOST in text:
        remote = re.search(r"Remote daemon:.*? on node (\S+)", text)
        host = remote.group(1) if remote else None
        return host, f"{_LOST} (on {host})" if host else _LOST
    if _ORTE_START in text or _DAEMON_FAILED in text:
        headline = _ORTE_START if _ORTE_START in text else _DAEMON_FAILED
        for line in lines:
            perm = _PERMISSION.match(line.strip())
            if perm:
                return perm.group(1).split("@")[-1], f"{line.strip()} ({headline})"
            agent = _AGENT.match(line.strip())
            if agent:
                return agent.group(1), f"{line.strip()} ({headline})"
        route = re.search(r"target node:\s*(\S+)", text)
        return (route.group(1) if route else None), headline
    if _INTERNAL in text:
        told = [block for block in _blocks(text) if not block.startswith(_INTERNAL)]
        return None, (told[0] if told else _INTERNAL)
    return None


# --------------------------------------------------------------------------- Slurm srun

# Launch failures only: "srun: error: n2: task 1: Exited with exit code 1" is a rank's own failure.
_SRUN = re.compile(
    r"srun: error: (Unable to create step.*|Unable to allocate resources.*|Task launch for .* failed on node (\S+?):.*|"
    r"Nodes? (\S+) (?:are|is) still not ready.*|Application launch failed.*|Invalid node name specified.*|"
    r"Requested node configuration is not available.*|.*Communication connection failure.*)"
)


def slurm(text: str) -> Optional[tuple[Optional[str], str]]:
    for line in _lines(text):
        match = _SRUN.search(line)
        if match:
            return match.group(2) or match.group(3), match.group(1).strip()
    return None


# --------------------------------------------------------------------------- MPICH Hydra / PALS mpiexec

_HYDRA_CONNECT = re.compile(r"unable to connect from \"?([\w.-]+)\"? to \"?([\w.-]+)\"?(.*)")
_HYDRA = re.compile(r"\[(?:mpiexec|proxy:[^\]]*)@([\w.-]+)\] (.*(?:HYD\w+|launch).*)")
_SSH = re.compile(r"^ssh: (?:Could not resolve hostname|connect to host) ([\w.-]+)")


def hydra(text: str) -> Optional[tuple[Optional[str], str]]:
    for line in _lines(text):
        ssh = _SSH.match(line.strip())
        if ssh:
            return ssh.group(1), line.strip()
        connect = _HYDRA_CONNECT.search(line)
        if connect:
            return connect.group(2), line.strip()
    for line in _lines(text):
        match = _HYDRA.search(line)
        if match:
            return None, match.group(2).strip()
    return None


def named(launcher: str, found: Optional[tuple[Optional[str], str]]) -> Optional[LauncherFailure]:
    """A parser's (host, message) as ``launcher``'s failure record; None when the parser found none."""
    if found is None:
        return None
    host, message = found
    return LauncherFailure(launcher, host, message)


def launcher_failure(launcher: str, text: str) -> Optional[LauncherFailure]:
    """The launcher-level failure ``text`` (the launcher's own output) reports, or None.

    Each launcher says which parser reads its output (its ``Launcher.launcher_failure`` hook)."""
    from envmatrix.launchers.base import get_launcher

    return get_launcher(launcher).launcher_failure(text)
