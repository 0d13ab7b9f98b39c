"""A whole nccl-tests stdout stream (preamble, table, footer, failure lines, interleaved NCCL lines) as a report.

Checked against the nccl-tests v2.19.6 sources; the formats this parser relies on are, as printf strings:

Preamble (``writeDeviceReport``)::

    # nccl-tests version %s nccl-headers=%d nccl-library=%d
    # Collective test starting: %s                      (basename of argv[0])
    # nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) warmup iters: %d
      iters: %d agg iters: %d validation: %d graph: %d unalign: %d   (one line)
    #  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s

Table (``writeResultHeader`` / ``writeBenchmarkLine*``), one line per size, built
from several printf calls (a fragment boundary after each)::

    %12li  %12li  %8s  %6s  %6s                 size count type redop root(%6i)
      %7s  %6s  %6s  %6g                        out-of-place time algbw busbw #wrong
      %7s  %7s  %7s  %7s                        -I 1 only: i_min i_max i_p99 i_cv%
      %7s  %6s  %6s  %6g                        in-place (#wrong is "    N/A" with -c 0)
      %7s  %7s  %7s  %7s                        -I 1 only
    %21s                                        -S 1 only: "%Y-%m-%d %H:%M:%S"

The floats are ``getFloatStr`` output (``%.2f``, then ``%.1f``, ``%.0f``, ``%.1e``
to fit the width); ``#wrong`` is ``%6g`` of the count, so counts of a million
or more come out as ``1.67772e+07`` (wider than 6, and rounded to 6 digits).
The column names come from the header line (``# size count type redop root
time|cputime algbw busbw #wrong ...``), which also tells whether the -I and -S
columns are present.

Footer (``writeResultFooter``, ``writeErrors``)::

    # Out of bounds values : %d OK|FAILED
    # Avg bus bandwidth    : %g [OK|FAILED]          (checked only with NCCL_TESTS_MIN_BW)
    # Collective test concluded: %s
    # error: %s                                      (ncclGetLastError(), may be a benign WARN)

Failures (``common.h``/``common.cu`` macros; printf, not rank-0 only)::

    %s: Test NCCL failure %s:%d '%s / %s'            host, file:line, ncclGetErrorString / last error
    %s: Test CUDA failure %s:%d '%s'
    %s: Test timeout (%ds) %s:%d
     .. %s pid %d: Test failure %s:%d                 one per stack frame, innermost first

Every print goes through the process's one stdout buffer, and NCCL writes its
INFO/WARN lines to the same ``FILE*``; a row started with the preamble can
therefore be spliced: ``<preamble><NCCL INFO line>\\n<rest of the row>\\n``, or
``<preamble>\\n[ts] host:pid:tid [d] file:line NCCL WARN ...\\n<rest>`` (WARN lines
start with a newline), or ``<preamble>vm: Test NCCL failure ...`` when the
collective fails.  The parser reads the row's fixed-width fields from the start
of the line, keeps a row fragment that ends at a fragment boundary, and joins it
with the continuation that follows.  Lines that are not table rows are ignored
(NCCL lines are kept as ``warnings`` for WARN only).  A last line without its
newline (truncated output) never yields a row.
"""

from __future__ import annotations

import math
import re
from typing import Optional

from envmatrix.parsers.nccl_tests.records import NcclTestsReport, collective_of, decode_nccl_version
from envmatrix.parsers.nccl_tests.table import ALL_SCHEMAS, Scan, Schema, lenient_row, preamble_of, rows_of, scan_row

# mpirun --tag-output "[1,0]<stdout>:", srun --label "0: "
_LAUNCHER_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+: (?=[ #\w.]))")

_VERSION = re.compile(r"^# nccl-tests version (\S+) nccl-headers=(\d+) nccl-library=(\d+)")
_STARTING = re.compile(r"^# Collective test starting: (\S+)")
_CONCLUDED = re.compile(r"^# Collective test concluded: (\S+)")
_DEVICE = re.compile(
    r"^#\s+Rank\s+(-?\d+)\s+Group\s+(-?\d+)\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(-?\d+)\s+\[([0-9A-Fa-f:.]+)\]\s*(.*?)\s*$"
)
_HEADER = re.compile(r"^#\s+size\s+count\s+type\s+redop\s+root\s+(?:time|cputime)\b")
_OOB = re.compile(r"^# Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVG = re.compile(r"^# Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_MEMORY = re.compile(r"^# GPU memory usage\s*:\s*(.*?)\s*$")
_ERROR = re.compile(r"^# error: (.*?)\s*$")
_JSON_TO = re.compile(r"^# Writing JSON output to (.+?)\s*$")
_REDUCED = re.compile(r"^# Reducing maxBytes to (\d+) due to memory limitation")
_CONFIG_INTS = (
    ("nthreads", re.compile(r"\bnThread (\d+)")),
    ("ngpus", re.compile(r"\bnGpus (\d+)")),
    ("minimum_bytes", re.compile(r"\bminBytes (\d+)")),
    ("maximum_bytes", re.compile(r"\bmaxBytes (\d+)")),
    ("warmup_iters", re.compile(r"\bwarmup iters: (-?\d+)")),
    ("iterations", re.compile(r"(?<!warmup )(?<!agg )\biters: (-?\d+)")),
    ("aggregated_iterations", re.compile(r"\bagg iters: (-?\d+)")),
    ("validation", re.compile(r"\bvalidation: (-?\d+)")),
    ("graph", re.compile(r"\bgraph: (-?\d+)")),
    ("unalign", re.compile(r"\bunalign: (-?\d+)")),
)
_STEP = re.compile(r"\bstep: (\d+)\((factor|bytes)\)")

_FAILURES = (
    re.compile(r"[^\s:]+: Test NCCL failure \S+:\d+ '.*'"),
    re.compile(r"[^\s:]+: Test CUDA failure \S+:\d+ '.*'"),
    re.compile(r"[^\s:]+: Test timeout \(-?\d+s\) \S+:\d+"),
    re.compile(r"\.\. \S+ pid \d+: Test failure \S+:\d+"),
)
_FATAL_PREFIXES = (
    "Invalid number of GPUs:",
    "invalid size specified for",
    "invalid sizes for 'minbytes' and 'maxbytes'",
    "invalid option '",
    "device implementation (-D > 0) requires",
    "Device implementation ",
    "Option -D (device implementation) requires",
    "Option -V (device CTA count) requires",
    "Incompatible NCCL versions.",
    "DeviceImplementation > 1 requires",
    "This test requires multimem support",
    "nRanks ",  # hypercube: "nRanks %d is not a power of 2, skipping"
)
_NCCL_WARN = re.compile(r"\bNCCL WARN ")


class _StdoutParser:
    def __init__(self) -> None:
        self.report = NcclTestsReport()
        self.schema: Optional[Schema] = None
        self.pending: Optional[tuple[str, Schema, dict[str, str]]] = None
        self.oob: list[tuple[int, bool]] = []
        self.avg: list[tuple[float, Optional[bool]]] = []

    # -- row scanning under the current (or, before any header, every) schema
    def scan(self, line: str) -> tuple[Scan, Schema]:
        schemas = (self.schema,) if self.schema else ALL_SCHEMAS
        best: Optional[tuple[Scan, Schema]] = None
        for schema in schemas:
            got = scan_row(line, schema)
            if got.status == "complete":
                return got, schema
            if got.status == "prefix" and (best is None or got.end > best[0].end):
                best = (got, schema)
        if best is not None:
            return best
        return Scan("none", {}, 0, 0), schemas[0]

    def lenient(self, line: str) -> Optional[tuple[dict[str, str], Schema]]:
        for schema in (self.schema,) if self.schema else ALL_SCHEMAS:
            values = lenient_row(line, schema)
            if values is not None:
                return values, schema
        return None

    def drop_pending(self) -> None:
        if self.pending is not None:
            self.report.incomplete.append(preamble_of(self.pending[2]))
            self.pending = None

    # -- non-row text: failures, WARNs
    def foreign(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        for rx in _FAILURES:
            for m in rx.finditer(text):
                self.report.errors.append(m.group().strip())
        if text.startswith(_FATAL_PREFIXES):
            self.report.errors.append(text)
        if _NCCL_WARN.search(text):
            self.report.warnings.append(text)

    def hash_line(self, line: str) -> None:
        rep = self.report
        if m := _DEVICE.match(line):
            rep.devices.append(
                {
                    "rank": int(m.group(1)),
                    "group": int(m.group(2)),
                    "pid": int(m.group(3)),
                    "host": m.group(4),
                    "device": int(m.group(5)),
                    "busid": m.group(6),
                    "name": m.group(7),
                }
            )
        elif _HEADER.match(line):
            names = line[1:].split()
            self.schema = Schema(per_iter="i_min" in names, timestamp=names[-1] == "timestamp", cputime=names[5] == "cputime")
        elif m := _VERSION.match(line):
            rep.version = m.group(1)
            rep.nccl_headers_code = int(m.group(2))
            rep.nccl_version_code = int(m.group(3))
            rep.nccl_version = decode_nccl_version(rep.nccl_version_code)
        elif m := _STARTING.match(line):
            rep.program = rep.program or m.group(1)  # several outputs concatenated: the first
        elif m := _CONCLUDED.match(line):
            rep.concluded = True
            rep.program = rep.program or m.group(1)
        elif line.startswith("# nThread "):
            for key, rx in _CONFIG_INTS:
                if mm := rx.search(line):
                    rep.config[key] = int(mm.group(1))
            if mm := _STEP.search(line):
                rep.config["step_factor" if mm.group(2) == "factor" else "step_bytes"] = int(mm.group(1))
        elif line.startswith("# Blocking Enabled:"):
            if "outer iteration" in line:
                rep.config["blocking_collectives"] = 3
            elif "no barrier" in line:
                rep.config["blocking_collectives"] = 2
            else:
                rep.config["blocking_collectives"] = 1
        elif line.startswith("# Per-Iteration Report:"):
            rep.config["per_iter_timing"] = True
            if mm := re.search(r"summary skips first (\d+) iterations", line):
                rep.config["per_iter_skip"] = int(mm.group(1))
        elif line.startswith("# Parallel Init Enabled"):
            rep.config["parallel_init"] = True
        elif m := _REDUCED.match(line):
            rep.config["maximum_bytes"] = int(m.group(1))
            rep.config["maximum_bytes_reduced"] = True
        elif m := _OOB.match(line):
            count = int(m.group(1))
            self.oob.append((count, m.group(2) == "OK" if m.group(2) else count == 0))
        elif m := _AVG.match(line):
            try:
                value = float(m.group(1))
            except ValueError:
                value = math.nan
            self.avg.append((value, {"OK": True, "FAILED": False}.get(m.group(2) or "")))
        elif m := _MEMORY.match(line):
            rep.memory_usage = m.group(1)
        elif m := _ERROR.match(line):
            rep.last_nccl_error = m.group(1)
        elif m := _JSON_TO.match(line):
            rep.json_output = m.group(1)

    def row(self, values: dict[str, str], schema: Schema) -> None:
        self.report.rows.extend(rows_of(values, schema))

    def line(self, line: str, terminated: bool) -> None:
        if self.pending is not None:
            text, schema, _ = self.pending
            cand = text + line
            got = scan_row(cand, schema)
            if got.status in ("complete", "prefix") and got.end > len(text):
                if got.status == "complete" and terminated:
                    self.pending = None
                    self.row(got.values, schema)
                else:
                    self.pending = (cand[: got.end], schema, got.values)
                self.foreign(cand[got.end :])
                return
            alone, _ = self.scan(line)
            if alone.status == "none" and not line.startswith("#"):
                self.foreign(line)  # NCCL lines between the fragments of a row
                return
            self.drop_pending()
        if line.startswith("#"):
            self.hash_line(line)
            return
        got, schema = self.scan(line)
        if got.status == "complete" and terminated:
            self.row(got.values, schema)
            self.foreign(line[got.end :])
        elif got.status != "complete" and terminated and (lenient := self.lenient(line)) is not None:
            self.row(*lenient)
        elif got.status in ("complete", "prefix"):
            self.pending = (line[: got.end], schema, got.values)
            self.foreign(line[got.end :])
        else:
            self.foreign(line)

    def finish(self) -> NcclTestsReport:
        self.drop_pending()
        rep = self.report
        if self.oob:
            rep.out_of_bounds = sum(c for c, _ in self.oob)
            rep.out_of_bounds_ok = all(ok for _, ok in self.oob)
        if self.avg:
            rep.avg_busbw = min(v for v, _ in self.avg)
            checks = [ok for _, ok in self.avg if ok is not None]
            rep.avg_busbw_ok = all(checks) if checks else None
        return rep


def parse_stdout(text: str, collective: Optional[str] = None) -> NcclTestsReport:
    """Parse nccl-tests stdout (optionally mixed with stderr and NCCL log lines).

    ``collective`` (a collective or a binary name) is used when the text does
    not name the program ("# Collective test starting: ...")."""
    parser = _StdoutParser()
    lines = text.split("\n")
    complete_last = text.endswith("\n")
    if complete_last:
        lines.pop()
    for i, raw in enumerate(lines):
        terminated = complete_last or i < len(lines) - 1
        line = _LAUNCHER_PREFIX.sub("", raw.rstrip("\r"), count=1)
        parser.line(line, terminated)
    rep = parser.finish()
    rep.truncated = bool(lines) and not complete_last and bool(lines[-1].strip())
    rep.collective = collective_of(rep.program) or (collective_of(collective) or collective if collective else None)
    return rep


_SIGNATURE = re.compile(
    r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+: )?"
    r"(?:# nccl-tests version |# Collective test starting: |#\s+size\s+count\s+type\s+redop\s+root\b|# Out of bounds values\s*:)",
    re.MULTILINE,
)


def looks_like_nccl_tests(text: str) -> bool:
    """True for nccl-tests stdout (its version line, table header or footer) or its -J JSON."""
    if _SIGNATURE.search(text):
        return True
    head = text.lstrip()[:4096]
    return head.startswith("{") and '"nccl_version"' in head and '"args"' in head and '"version"' in head
