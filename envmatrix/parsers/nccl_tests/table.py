"""One line of the nccl-tests fixed-width table: its fields read by position, complete or as a spliced prefix.

The printf formats are in ``stdout``'s docstring.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from envmatrix.parsers.nccl_tests.records import NcclTestsRow

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
class Schema:
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


ALL_SCHEMAS = tuple(Schema(p, t) for p in (False, True) for t in (False, True))


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
class Scan:
    status: str  # "complete" | "prefix" | "none"
    values: dict[str, str]
    end: int
    segments: int


def scan_row(line: str, schema: Schema) -> Scan:
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
        return Scan("complete", values, pos, done)
    if done == 0:
        return Scan("none", {}, 0, 0)
    return Scan("prefix", values, pos, done)


def lenient_row(line: str, schema: Schema) -> Optional[dict[str, str]]:
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


def parse_wrong(text: str) -> Optional[int]:
    if text == "N/A":
        return None
    value = float(text)
    return int(value) if math.isfinite(value) else None


def rows_of(values: dict[str, str], schema: Schema) -> list[NcclTestsRow]:
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
                wrong=parse_wrong(values[f"{seg}.wrong"]),
                **common,
                **extra,
            )
        )
    return rows


def preamble_of(values: dict[str, str]) -> dict[str, Any]:
    return {
        "size_bytes": int(values["pre.size"]),
        "count": int(values["pre.count"]),
        "dtype": values["pre.type"],
        "redop": values["pre.redop"],
        "root": int(values["pre.root"]),
    }
