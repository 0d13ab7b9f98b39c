"""Find the one line that explains a failure (pure; tested on recorded text)."""

from __future__ import annotations

import re
from typing import Optional

from envmatrix.results import clipped

_NCCL_WARN = re.compile(r"NCCL WARN\s+(.*)")
_NCCL_CODE = re.compile(
    r"(ncclInvalidUsage|ncclSystemError|ncclInternalError|ncclRemoteError|ncclUnhandledCudaError|ncclInvalidArgument|ncclInProgress)"
)
_EXC = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception|Exit)):\s*(.+)$")
_BANNER = re.compile(r"^\s*[-=*_#]{5,}\s*$")


def is_banner(line: str) -> bool:
    """A separator line (OpenMPI frames its messages in ``-----``): never a root cause."""
    return bool(_BANNER.match(line))


def root_cause_line(*texts: Optional[str]) -> Optional[str]:
    """Most telling line: NCCL 'Last error', NCCL WARN, an nccl* code, an exception; at most results.LINE_CHARS."""
    line = _telling_line(texts)
    return None if line is None else clipped(line)


def _telling_line(texts: tuple[Optional[str], ...]) -> Optional[str]:
    lines = [ln.rstrip() for text in texts if text for ln in text.splitlines() if ln.strip() and not is_banner(ln)]
    for i, line in enumerate(lines):
        if line.strip().startswith("Last error") and i + 1 < len(lines):
            return lines[i + 1].strip()
    for line in lines:
        match = _NCCL_WARN.search(line)
        if match:
            return match.group(1).strip()
    for line in lines:
        if _NCCL_CODE.search(line):
            return line.strip()
    for line in lines:
        match = _EXC.match(line)
        if match:
            return line.strip()
    return lines[-1].strip() if lines else None


def tail(text: str, max_lines: int = 40, max_chars: int = 4000) -> str:
    return "\n".join(text.splitlines()[-max_lines:])[-max_chars:]
