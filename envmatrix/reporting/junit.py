"""JUnit XML (pure): one testcase per (setup, grid), the root-cause line as the failure message."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import Sequence

from envmatrix.reporting.text import one_line, visible
from envmatrix.results import UNRESOLVED, ProbeResult

LOG_TAIL_CHARS = 4000


def _root_rank_tail(result: ProbeResult) -> str:
    rank = (result.root_cause or {}).get("rank")
    for r in result.ranks:
        if r.rank == rank:
            return r.log_tail[-LOG_TAIL_CHARS:]
    return ""


def junit_xml(suite: str, results: Sequence[ProbeResult]) -> str:
    # newest attempt of a cell wins; a cell is a matrix column on a grid: with a network axis, each condition's own
    cells = {(r.column, r.grid): r for r in results}
    # a cell the probe could not test (exit 125) is JUnit's skipped, as the sweep counts it apart from failures
    skipped = sum(r.outcome == UNRESOLVED for r in cells.values())
    failures = sum(not r.passed for r in cells.values()) - skipped
    total_time = sum(r.duration_s for r in cells.values())
    root = ET.Element("testsuites", name="envmatrix", tests=str(len(cells)), failures=str(failures))
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cells)), failures=str(failures), errors="0",
                       skipped=str(skipped), time=f"{total_time:.3f}")
    for (setup, grid), r in cells.items():
        # XML 1.0 cannot hold a log's terminal escapes, NUL or bell at all (the file would not parse): shown escaped
        case = ET.SubElement(ts, "testcase", classname=one_line(f"{suite}.{grid}"), name=one_line(f"({setup}) {grid}"),
                             time=f"{r.duration_s:.3f}")
        if not r.passed:
            rc = r.root_cause or {}
            line = str(rc.get("line") or r.outcome)
            where = "" if rc.get("rank") is None else f"rank {rc['rank']}: "
            kind = "skipped" if r.outcome == UNRESOLVED else "failure"
            failure = ET.SubElement(case, kind, message=one_line(f"{r.outcome}: {where}{line}"), type=r.outcome)
            failure.text = visible(_root_rank_tail(r))
        env = "\n".join(f"{k}={one_line(v)}" for k, v in sorted(r.intended_env.items()))
        if env:
            ET.SubElement(case, "system-out").text = env
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path: str, suite: str, results: Sequence[ProbeResult]) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write(junit_xml(suite, results))
    os.replace(tmp, path)
    return path
