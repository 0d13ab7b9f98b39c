"""The nccl-tests ``-J file.json`` report as a report, repairing a file a crash left unterminated.

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
from typing import Any, Optional

from envmatrix.parsers.nccl_tests.records import NcclTestsReport, NcclTestsRow, collective_of, decode_nccl_version
from envmatrix.parsers.nccl_tests.table import parse_wrong

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
        wrong=None if nwrong is None else parse_wrong(str(nwrong)),
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
