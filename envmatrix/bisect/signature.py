"""Failure signatures: is this probe failing *the same way* as the env being bisected?"""

from __future__ import annotations

import re
from typing import Optional

from envmatrix.results import LAUNCH_ERROR, PASS, UNRESOLVED, ProbeResult

_NOISE = [
    # NCCL echoes every forced variable after the reason ("NCCL_ALGO was set to PAT. NCCL_PROTO was set to
    # Simple."): the same failure would get a new signature for each subset of those variables (seen on the
    # 2xH200 box, where it left the PAT search unable to recognise its own failure).
    (re.compile(r"\s*\bnccl_\w+ was set to [^.]*\.?", re.I), ""),
    # A file made per run under a temp directory has a random name (NCCL's /dev/shm/nccl-XXXXXX segments, Python's
    # /tmp/tmpXXXXXXXX): one culprit's "failed to extend /dev/shm/nccl-kdkb43u3" was another failure each run, so
    # its bisect spent the probe cap naming nothing (exit 3).
    (re.compile(r"(/dev/shm|/tmp|/var/tmp)/[^\s/:'\"]+"), r"\1/#"),
    (re.compile(r"0x[0-9a-f]+", re.I), "0x#"),
    (re.compile(r"\[rank\d+\]:?"), ""),
    (re.compile(r"\d+"), "#"),  # counts, ranks, pids, ports, line numbers
    (re.compile(r"\s+"), " "),
]


def normalize(line: Optional[str]) -> str:
    text = (line or "").strip().lower()
    for pattern, repl in _NOISE:
        text = pattern.sub(repl, text)
    return text.strip()


def signature(result: ProbeResult) -> tuple[str, str]:
    return result.outcome, normalize((result.root_cause or {}).get("line"))


def classify(result: ProbeResult, original: tuple[str, str]) -> str:
    """pass / fail (same failure) / unresolved (another failure, exit 125, launch error)."""
    if result.outcome == PASS:
        return "pass"
    if result.outcome in (UNRESOLVED, LAUNCH_ERROR):
        return "unresolved"
    return "fail" if signature(result) == original else "unresolved"
