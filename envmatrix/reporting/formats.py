"""Report formats registry: markdown and json files in the run directory."""

from __future__ import annotations

import json
import os
from typing import Callable, NamedTuple, Sequence

from envmatrix.registry import Registry
from envmatrix.reporting.hosts import HOST_COLUMNS, algorithms_line, host_cells, host_rows
from envmatrix.reporting.matrix import Matrix
from envmatrix.results import ProbeResult


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(matrix: Matrix, results: Sequence[ProbeResult], title: str) -> str:
    out = [f"# {title}", "", "1 = every rank passed init and the value-checked collectives; 0 = failure; "
           "s = slow (correct, but below an expected busbw or above an expected time: measured / expected under Failures); - = not run.", ""]
    out.append("| grid | " + " | ".join(f"({c})" for c in matrix.columns) + " |")
    out.append("| ---- | " + " | ".join("---" for _ in matrix.columns) + " |")
    for row in matrix.rows:
        out.append(f"| {row} | " + " | ".join(matrix.cell(row, c) for c in matrix.columns) + " |")
    placed = {r.grid: r.placement for r in results if r.placement.get("emulated_hosts") or r.shared_gpu}
    if placed:  # where emulated hosts ran: a shared GPU's cells show pass/fail and transport, not bandwidth
        out += ["", "## Placement (emulated hosts)", "", "| grid | placement | hosts |", "| --- | --- | --- |"]
        out += [f"| {g} | {p.get('label')} | {', '.join(p.get('emulated_hosts') or [])} |" for g, p in placed.items()]
    out += ["", "## Setups", "", "| setup | env (diff against the first setup) |", "| --- | --- |"]
    out += [f"| ({name}) | `{_md_escape(env)}` |" for name, env in matrix.legend]
    if any(r.nccl.get("transport") for r in results):
        by_cell = {(r.grid, r.setup_name): r.nccl.get("transport") or "" for r in results}
        out += ["", "## Transport per cell (from NCCL's log)", ""]
        out.append("| grid | " + " | ".join(f"({c})" for c in matrix.columns) + " |")
        out.append("| ---- | " + " | ".join("---" for _ in matrix.columns) + " |")
        for row in matrix.rows:
            out.append(f"| {row} | " + " | ".join(by_cell.get((row, c), "") or "-" for c in matrix.columns) + " |")
    algorithms = [(r, algorithms_line(r.nccl or {})) for r in results]
    if any(line for _, line in algorithms):
        out += ["", "## Algorithm and protocol per collective (NCCL TUNING lines, rank 0)", "", "| setup | grid | ran |", "| --- | --- | --- |"]
        out += [f"| ({r.setup_name}) | {r.grid} | {_md_escape(line)} |" for r, line in algorithms if line]
    if matrix.failures:
        out += ["", "## Failures", "", "| setup | grid | class | rank | host | root cause |", "| --- | --- | --- | --- | --- | --- |"]
        out += [
            f"| ({f.setup}) | {f.grid} | {f.outcome} | {'' if f.rank is None else f.rank} | {f.host or ''} | {_md_escape(f.line)[:300]} |"
            for f in matrix.failures
        ]
    hosts = host_rows(results)
    if hosts:
        out += ["", "## Hosts", "", "| " + " | ".join(HOST_COLUMNS) + " |", "|" + " --- |" * len(HOST_COLUMNS)]
        out += ["| " + " | ".join(_md_escape(c) for c in host_cells(row)) + " |" for row in hosts]
    if any(r.metrics for r in results):
        from envmatrix.reporting.bench_tables import busbw_by_setup, markdown_table, shared_gpu_note

        for grid in matrix.rows:
            header, rows = busbw_by_setup(results, grid)
            note = shared_gpu_note([r for r in results if r.grid == grid])
            if rows:
                out += ["", f"## busbw on {grid} (largest size benched)" + (f": {note}" if note else ""), "",
                        markdown_table(header, rows)]
    versions = next((r.versions for r in results if r.versions), {})
    if versions:
        out += ["", "## Versions", ""] + [f"- {k}: {v}" for k, v in sorted(versions.items())]
    return "\n".join(out) + "\n"


def render_json(matrix: Matrix, results: Sequence[ProbeResult], title: str) -> str:
    payload = {
        "title": title,
        "matrix": {row: {c: matrix.cell(row, c) for c in matrix.columns} for row in matrix.rows},
        "legend": dict(matrix.legend),
        "results": [r.to_json() for r in results],
    }
    return json.dumps(payload, indent=1, sort_keys=True, default=str)


class ReportFormat(NamedTuple):
    filename: str  # written in the run directory
    render: Callable[[Matrix, Sequence[ProbeResult], str], str]


_FORMATS: Registry[ReportFormat] = Registry("report format")
_FORMATS.add("markdown", ReportFormat("matrix.md", render_markdown))
_FORMATS.add("json", ReportFormat("results.json", render_json))
format_names = _FORMATS.names


def get_format(name: str) -> ReportFormat:
    return _FORMATS.get(name, "report")


def write_reports(run_dir: str, matrix: Matrix, results: Sequence[ProbeResult], title: str) -> list[str]:
    paths = []
    for name in _FORMATS:
        filename, render = get_format(name)
        path = os.path.join(run_dir, filename)
        tmp = f"{path}.tmp"
        with open(tmp, "w") as fh:
            fh.write(render(matrix, results, title))
        os.replace(tmp, path)
        paths.append(path)
    return paths
