"""Parse NVIDIA nccl-tests output: the stdout table and the ``-J file.json`` report.

Pure: text in, :class:`NcclTestsReport` out; no file or process access.  Checked
against the nccl-tests v2.19.6 sources (``src/util.cu``, ``src/common.cu``,
``src/common.h``); the formats this parser relies on are, as printf strings:

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

JSON (``util.cu``, ``JSON_FILE_VERSION 3``), compact, ``/`` escaped as ``\\/``::

    {"version":3,"start_time":"%Y-%m-%d %H:%M:%S","args":[argv...],"env":[...],
     "nccl_version":22809,
     "config":{"nthreads":1,"ngpus":4,"minimum_bytes":8,"maximum_bytes":..,
               "step_factor"|"step_bytes":2,"warmup_iters":1,"iterations":20,
               "aggregated_iterations":1,"validation":1,"graph":0,
               "blocking_collectives":"false","per_iter_timing":"false",
               "per_iter_skip":0,"parallel_init":"false",
               "devices":[{"rank":0,"group":0,"pid":..,"hostname":"vm","device":0,
                           "device_hex":"0000:60:00","device_info":"NVIDIA H200"}]},
     "results":[{"size":8,"count":2,"type":"float","redop":"sum","root":"    -1",
                 "out_of_place":{"time"|"cpu_time":%lf,"alg_bw":%lf,"bus_bw":%lf,
                                 "nwrong":%lf|null},
                 "out_of_place_per_iter":{...,"min_us","max_us","p99_us","cv_pct",...},
                 "in_place":{...},"in_place_per_iter":{...},
                 "actual_iterations":20,"experiment_name":""}, ...],
     "out_of_bounds":{"count":0,"okay":"true"},
     "average_bus_bandwidth":{"bandwidth":%lf,"okay":"unchecked"|"true"|"false"},
     "errors":[ncclGetLastError()],"end_time":"..."}

Booleans are the strings ``"true"``/``"false"``, ``root`` is the ``%6i`` string,
NaN is ``"nan"`` and infinity the bare (invalid JSON) ``inf``.  Without MPI only
the first device of the process is listed.  A failed run closes the open objects
(a row may lack ``in_place``) and has no footer; a crashed one leaves the JSON
unterminated, which :func:`parse_json` repairs by cutting at the last complete
object.
"""

from __future__ import annotations

import json
import math
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


# ---------------------------------------------------------------------------
# stdout: the fixed-width table
# ---------------------------------------------------------------------------

_INT = re.compile(r"-?\d+")
_WORD = re.compile(r"[A-Za-z0-9_]+")
_FLOAT = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)", re.IGNORECASE)
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")

# (name, separator, width, pattern, empty allowed); "wrong" and "timestamp" are special
_PREAMBLE = (
    ("size", 0, 12, _INT, False),
    ("count", 2, 12, _INT, False),
    ("type", 2, 8, _WORD, False),
    ("redop", 2, 6, _WORD, True),  # hypercube prints ""
    ("root", 2, 6, _INT, False),
)
_BODY = (
    ("time", 2, 7, _FLOAT, False),
    ("algbw", 2, 6, _FLOAT, False),
    ("busbw", 2, 6, _FLOAT, False),
    ("wrong", 2, 6, _FLOAT, False),
)
_ITER = (
    ("i_min", 2, 7, _FLOAT, False),
    ("i_max", 2, 7, _FLOAT, False),
    ("i_p99", 2, 7, _FLOAT, False),
    ("i_cv", 2, 7, _FLOAT, False),
)


@dataclass(frozen=True)
class _Schema:
    per_iter: bool = False
    timestamp: bool = False
    cputime: bool = False

    def segments(self) -> list[tuple[str, tuple]]:
        segs: list[tuple[str, tuple]] = [("pre", _PREAMBLE), ("oop", _BODY)]
        if self.per_iter:
            segs.append(("oop_iter", _ITER))
        segs.append(("ip", _BODY))
        if self.per_iter:
            segs.append(("ip_iter", _ITER))
        if self.timestamp:
            segs.append(("ts", ()))
        return segs

    def n_tokens(self) -> int:
        return 5 + (8 if self.per_iter else 0) + 8 + (2 if self.timestamp else 0)


_ALL_SCHEMAS = tuple(_Schema(p, t) for p in (False, True) for t in (False, True))


def _read_field(line: str, pos: int, sep: int, width: int, rx: re.Pattern, allow_empty: bool):
    """One printf ``%*s`` field after ``sep`` spaces: (text, end) or None."""
    n = len(line)
    start, end = pos + sep, pos + sep + width
    if end > n or line[pos:start] != " " * sep:
        return None
    window = line[start:end]
    value = window.lstrip(" ")
    if not value:
        return ("", end) if allow_empty else None
    if window[0] != " " and end < n and line[end] != " ":
        # printf never truncates: the value is wider than its field
        m = rx.match(line, start)
        if not m or m.end() < end:
            return None
        return m.group(), m.end()
    if not rx.fullmatch(value):
        return None
    return value, end


def _read_wrong(line: str, pos: int):
    if line.startswith("    N/A", pos):
        return "N/A", pos + 7
    return _read_field(line, pos, 2, 6, _FLOAT, False)


def _read_timestamp(line: str, pos: int):
    if line.startswith("  ", pos):
        m = _TIMESTAMP.match(line, pos + 2)
        if m:
            return m.group(), m.end()
    return None


@dataclass
class _Scan:
    status: str  # "complete" | "prefix" | "none"
    values: dict[str, str]
    end: int
    segments: int


def _scan(line: str, schema: _Schema) -> _Scan:
    """Read the fixed-width row fields from the start of ``line``.

    "complete": every field read (text may follow at ``end``: a spliced line);
    "prefix": whole segments read (at least the preamble) up to ``end``, a
    fragment boundary; what follows is not the next segment."""
    values: dict[str, str] = {}
    pos = 0
    done = 0
    for seg_name, fields in schema.segments():
        seg_start = pos
        if seg_name == "ts":
            got = _read_timestamp(line, pos)
            if got is None:
                break
            values["timestamp"], pos = got
            done += 1
            continue
        ok = True
        for i, (name, sep, width, rx, empty) in enumerate(fields):
            got = _read_wrong(line, pos) if name == "wrong" else _read_field(line, pos, sep, width, rx, empty)
            if got is None:
                ok = False
                break
            values[f"{seg_name}.{name}"], pos = got
        if not ok:
            # the row stops at the last fragment boundary: foreign text spliced
            # in there, the line ends (truncated), or it is garbled after it
            values = {k: v for k, v in values.items() if not k.startswith(seg_name + ".")}
            pos = seg_start
            break
        done += 1
    if done == len(schema.segments()):
        return _Scan("complete", values, pos, done)
    if done == 0:
        return _Scan("none", {}, 0, 0)
    return _Scan("prefix", values, pos, done)


def _lenient(line: str, schema: _Schema) -> Optional[dict[str, str]]:
    """Whitespace-split fallback for a whole row whose spacing was altered."""
    tokens = line.split()
    n = schema.n_tokens()
    if len(tokens) == n - 1 and len(tokens) > 4 and _INT.fullmatch(tokens[3]):
        tokens.insert(3, "")  # empty redop (hypercube)
    if len(tokens) != n:
        return None
    values: dict[str, str] = {}
    it = iter(tokens)
    for seg_name, fields in schema.segments():
        if seg_name == "ts":
            ts = f"{next(it)} {next(it)}"
            if not _TIMESTAMP.fullmatch(ts):
                return None
            values["timestamp"] = ts
            continue
        for name, _sep, _width, rx, empty in fields:
            tok = next(it)
            if name == "wrong" and tok == "N/A":
                pass
            elif not (rx.fullmatch(tok) or (empty and tok == "")):
                return None
            values[f"{seg_name}.{name}"] = tok
    return values


def _num(text: str) -> float:
    return float(text)


def _wrong(text: str) -> Optional[int]:
    if text == "N/A":
        return None
    value = float(text)
    return int(value) if math.isfinite(value) else None


def _rows_of(values: dict[str, str], schema: _Schema) -> list[NcclTestsRow]:
    common = dict(
        size_bytes=int(values["pre.size"]),
        count=int(values["pre.count"]),
        dtype=values["pre.type"],
        redop=values["pre.redop"],
        root=int(values["pre.root"]),
        timestamp=values.get("timestamp"),
        cputime=schema.cputime,
    )
    rows = []
    for seg, in_place in (("oop", False), ("ip", True)):
        extra: dict[str, Any] = {}
        if schema.per_iter:
            extra = dict(
                iter_min_us=_num(values[f"{seg}_iter.i_min"]),
                iter_max_us=_num(values[f"{seg}_iter.i_max"]),
                iter_p99_us=_num(values[f"{seg}_iter.i_p99"]),
                iter_cv_pct=_num(values[f"{seg}_iter.i_cv"]),
            )
        rows.append(
            NcclTestsRow(
                in_place=in_place,
                time_us=_num(values[f"{seg}.time"]),
                algbw_gbps=_num(values[f"{seg}.algbw"]),
                busbw_gbps=_num(values[f"{seg}.busbw"]),
                wrong=_wrong(values[f"{seg}.wrong"]),
                **common,
                **extra,
            )
        )
    return rows


def _preamble_of(values: dict[str, str]) -> dict[str, Any]:
    return {
        "size_bytes": int(values["pre.size"]),
        "count": int(values["pre.count"]),
        "dtype": values["pre.type"],
        "redop": values["pre.redop"],
        "root": int(values["pre.root"]),
    }


# --- '#' lines and failure lines ----------------------------------------------

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
        self.schema: Optional[_Schema] = None
        self.pending: Optional[tuple[str, _Schema, dict[str, str]]] = None
        self.oob: list[tuple[int, bool]] = []
        self.avg: list[tuple[float, Optional[bool]]] = []

    # -- row scanning under the current (or, before any header, every) schema
    def scan(self, line: str) -> tuple[_Scan, _Schema]:
        schemas = (self.schema,) if self.schema else _ALL_SCHEMAS
        best: Optional[tuple[_Scan, _Schema]] = None
        for schema in schemas:
            got = _scan(line, schema)
            if got.status == "complete":
                return got, schema
            if got.status == "prefix" and (best is None or got.end > best[0].end):
                best = (got, schema)
        if best is not None:
            return best
        return _Scan("none", {}, 0, 0), schemas[0]

    def lenient(self, line: str) -> Optional[tuple[dict[str, str], _Schema]]:
        for schema in (self.schema,) if self.schema else _ALL_SCHEMAS:
            values = _lenient(line, schema)
            if values is not None:
                return values, schema
        return None

    def drop_pending(self) -> None:
        if self.pending is not None:
            self.report.incomplete.append(_preamble_of(self.pending[2]))
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
            self.schema = _Schema(per_iter="i_min" in names, timestamp=names[-1] == "timestamp", cputime=names[5] == "cputime")
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

    def row(self, values: dict[str, str], schema: _Schema) -> None:
        self.report.rows.extend(_rows_of(values, schema))

    def line(self, line: str, terminated: bool) -> None:
        if self.pending is not None:
            text, schema, _ = self.pending
            cand = text + line
            got = _scan(cand, schema)
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


# ---------------------------------------------------------------------------
# -J JSON
# ---------------------------------------------------------------------------

_BARE_INF = re.compile(r"(?<=[:,\[])(-?)inf(?=[,\]}])")


def _close_truncated(text: str) -> Optional[Any]:
    """Cut an unterminated JSON document after its last complete object/list and close it."""
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []
    in_str = esc = False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
            cuts.append((i + 1, "".join(reversed(stack))))
    for end, closers in reversed(cuts[-64:]):
        try:
            return json.loads(text[:end] + closers)
        except ValueError:
            continue
    return None


def _load_json(text: str) -> tuple[Any, bool]:
    body = text.strip()
    for candidate in (body, _BARE_INF.sub(r"\1Infinity", body)):
        try:
            return json.loads(candidate), False
        except ValueError:
            pass
    repaired = _close_truncated(_BARE_INF.sub(r"\1Infinity", body))
    if repaired is None:
        raise ValueError("not nccl-tests JSON (unparseable even after closing it)")
    return repaired, True


def _flag(value: Any) -> Optional[bool]:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    if isinstance(value, (int, float)):
        return bool(value)
    return None


def _float(value: Any) -> float:
    return float(value) if value is not None else math.nan


def _json_row(result: dict[str, Any], in_place: bool) -> Optional[NcclTestsRow]:
    key = "in_place" if in_place else "out_of_place"
    body = result.get(key)
    if not isinstance(body, dict):
        return None
    cputime = "cpu_time" in body and "time" not in body
    nwrong = body.get("nwrong")
    per_iter = result.get(key + "_per_iter")
    extra: dict[str, Any] = {}
    if isinstance(per_iter, dict):
        extra = dict(
            iter_min_us=_float(per_iter.get("min_us")),
            iter_max_us=_float(per_iter.get("max_us")),
            iter_p99_us=_float(per_iter.get("p99_us")),
            iter_cv_pct=_float(per_iter.get("cv_pct")),
        )
    return NcclTestsRow(
        size_bytes=int(result["size"]),
        count=int(result["count"]),
        dtype=str(result.get("type", "")),
        redop=str(result.get("redop", "")),
        root=int(str(result.get("root", "-1")).strip() or -1),
        in_place=in_place,
        time_us=_float(body.get("cpu_time" if cputime else "time")),
        algbw_gbps=_float(body.get("alg_bw")),
        busbw_gbps=_float(body.get("bus_bw")),
        wrong=None if nwrong is None else _wrong(str(nwrong)),
        cputime=cputime,
        **extra,
    )


def parse_json(text: str) -> NcclTestsReport:
    """Parse the ``-J file.json`` report (``JSON_FILE_VERSION`` 3). Raises ValueError if not JSON."""
    data, repaired = _load_json(text)
    if not isinstance(data, dict):
        raise ValueError("not nccl-tests JSON (top level is not an object)")
    rep = NcclTestsReport(truncated=repaired)
    args = data.get("args") or []
    if args:
        rep.program = os.path.basename(str(args[0]).replace("\\", "/"))
        rep.collective = collective_of(rep.program)
    if isinstance(data.get("nccl_version"), int):
        rep.nccl_version_code = data["nccl_version"]
        rep.nccl_version = decode_nccl_version(rep.nccl_version_code)
    config = dict(data.get("config") or {})
    for dev in config.pop("devices", None) or []:
        rep.devices.append(
            {
                "rank": dev.get("rank"),
                "group": dev.get("group"),
                "pid": dev.get("pid"),
                "host": dev.get("hostname"),
                "device": dev.get("device"),
                "busid": dev.get("device_hex"),
                "name": dev.get("device_info"),
            }
        )
    for key in ("blocking_collectives", "per_iter_timing", "parallel_init"):
        if key in config:
            config[key] = _flag(config[key])
    rep.config = config
    for result in data.get("results") or []:
        if not isinstance(result, dict) or "size" not in result:
            continue
        oop, ip = _json_row(result, False), _json_row(result, True)
        if ip is None:  # the run failed inside this size
            rep.incomplete.append(
                {
                    "size_bytes": int(result["size"]),
                    "count": int(result.get("count", 0)),
                    "dtype": str(result.get("type", "")),
                    "redop": str(result.get("redop", "")),
                    "root": int(str(result.get("root", "-1")).strip() or -1),
                }
            )
            continue
        rep.rows.extend(r for r in (oop, ip) if r is not None)
    oob = data.get("out_of_bounds")
    if isinstance(oob, dict) and "count" in oob:
        rep.out_of_bounds = int(oob["count"])
        rep.out_of_bounds_ok = _flag(oob.get("okay"))
        if rep.out_of_bounds_ok is None:
            rep.out_of_bounds_ok = rep.out_of_bounds == 0
    avg = data.get("average_bus_bandwidth")
    if isinstance(avg, dict) and "bandwidth" in avg:
        rep.avg_busbw = _float(avg["bandwidth"])
        rep.avg_busbw_ok = _flag(avg.get("okay"))  # "unchecked" -> None
    errors = [e for e in data.get("errors") or [] if isinstance(e, str) and e]
    rep.last_nccl_error = errors[-1] if errors else None
    rep.concluded = "end_time" in data and "out_of_bounds" in data
    return rep
