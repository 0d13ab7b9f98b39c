"""The records nccl-tests output parses into (a row, a report) and the naming of its programs and NCCL versions."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from envmatrix.bench.formulas import collective_of_binary

# gather_perf, scatter_perf, hypercube_perf, alltoallv_perf have no row in the
# collectives table (nothing in envmatrix benches them): collective_of() names them by stripping ``_perf``.
COLLECTIVE_OF_BINARY = collective_of_binary()

SOURCE = "nccl-tests"


def decode_nccl_version(code: int) -> str:
    """``NCCL_VERSION_CODE`` -> ``"2.28.9"`` (22809; codes below 2.9 are ``X*1000+Y*100+Z``)."""
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def collective_of(program: Optional[str]) -> Optional[str]:
    """``all_reduce_perf`` / ``./build/all_reduce_perf_mpi`` -> ``allreduce``.

    Binaries not in :data:`COLLECTIVE_OF_BINARY` (``alltoallv_perf``) give their
    name without ``_perf``; a name that is already a collective is kept."""
    if not program:
        return None
    name = os.path.basename(program.strip().replace("\\", "/"))
    if name in COLLECTIVE_OF_BINARY.values():
        return name
    m = re.match(r"(\w+?_perf)(?:_\w+)?$", name)
    if not m:
        return None
    binary = m.group(1)
    return COLLECTIVE_OF_BINARY.get(binary, binary[: -len("_perf")])


@dataclass(frozen=True)
class NcclTestsRow:
    """One half (out-of-place or in-place) of one nccl-tests table line."""

    size_bytes: int
    count: int
    dtype: str  # as printed: "float", "half", "bfloat16", "int8", ...
    redop: str  # "sum", ..., "none" (gather-like tests), "" (hypercube)
    root: int  # -1 where the test has no root
    in_place: bool
    time_us: float  # CPU time when the header says "cputime" (-C 1)
    algbw_gbps: float
    busbw_gbps: float
    wrong: Optional[int]  # None for "N/A" (-c 0)
    # -I 1 per-iteration columns, -S 1 timestamp, -C 1: absent otherwise
    iter_min_us: Optional[float] = None
    iter_max_us: Optional[float] = None
    iter_p99_us: Optional[float] = None
    iter_cv_pct: Optional[float] = None
    timestamp: Optional[str] = None
    cputime: bool = False

    def to_metric(self, collective: str) -> dict[str, Any]:
        """The envmatrix metric row (``ProbeResult.metrics``); optional columns only when present."""
        row: dict[str, Any] = {
            "collective": collective,
            "size_bytes": self.size_bytes,
            "count": self.count,
            "dtype": self.dtype,
            "redop": self.redop,
            "root": self.root,
            "in_place": self.in_place,
            "time_us": self.time_us,
            "algbw_gbps": self.algbw_gbps,
            "busbw_gbps": self.busbw_gbps,
            "wrong": self.wrong,
            "source": SOURCE,
        }
        if self.iter_min_us is not None:
            row.update(
                iter_min_us=self.iter_min_us,
                iter_max_us=self.iter_max_us,
                iter_p99_us=self.iter_p99_us,
                iter_cv_pct=self.iter_cv_pct,
            )
        if self.timestamp is not None:
            row["timestamp"] = self.timestamp
        if self.cputime:
            row["time_kind"] = "cputime"
        return row


@dataclass
class NcclTestsReport:
    rows: list[NcclTestsRow] = field(default_factory=list)
    collective: Optional[str] = None
    version: Optional[str] = None  # nccl-tests version ("2.19.6"); not in the JSON
    nccl_version: Optional[str] = None  # library version, "2.28.9"
    out_of_bounds: Optional[int] = None  # summed over footers (several outputs concatenated)
    out_of_bounds_ok: Optional[bool] = None  # all footers OK; None: no footer
    avg_busbw: Optional[float] = None  # the lowest footer value
    devices: list[dict[str, Any]] = field(default_factory=list)  # rank group pid host device busid name
    errors: list[str] = field(default_factory=list)  # nccl-tests' own failure lines, in order
    # --- beyond the brief's minimum
    program: Optional[str] = None  # "all_reduce_perf" (basename of argv[0])
    nccl_version_code: Optional[int] = None  # nccl-library=22809 / JSON nccl_version
    nccl_headers_code: Optional[int] = None  # nccl-headers=22809 (stdout only)
    avg_busbw_ok: Optional[bool] = None  # None: unchecked (no NCCL_TESTS_MIN_BW)
    config: dict[str, Any] = field(default_factory=dict)  # JSON "config" key names
    warnings: list[str] = field(default_factory=list)  # NCCL WARN lines seen
    last_nccl_error: Optional[str] = None  # "# error: ..." / JSON "errors": NCCL's last WARN text
    incomplete: list[dict[str, Any]] = field(default_factory=list)  # rows started, never finished
    memory_usage: Optional[str] = None  # "# GPU memory usage : ..." (-M 1)
    json_output: Optional[str] = None  # "# Writing JSON output to PATH"
    concluded: bool = False  # "# Collective test concluded" / JSON "end_time" seen
    truncated: bool = False  # last stdout line unterminated / JSON had to be repaired

    @property
    def wrong_total(self) -> int:
        return sum(r.wrong for r in self.rows if r.wrong is not None)

    @property
    def ok(self) -> bool:
        """Rows, a clean footer, no #wrong, no failure line, no row left unfinished."""
        return (
            bool(self.rows)
            and not self.errors
            and not self.incomplete
            and self.out_of_bounds_ok is True
            and self.wrong_total == 0
            and self.avg_busbw_ok is not False
        )

    def metrics(self, collective: Optional[str] = None) -> list[dict[str, Any]]:
        name = collective or self.collective
        if not name:
            raise ValueError("collective unknown: pass collective= (no program name in the text)")
        return [row.to_metric(name) for row in self.rows]
