"""Report formats registry: markdown and json files in the run directory."""

from __future__ import annotations

import json
import os
from typing import Callable, NamedTuple, Sequence

from envmatrix.registry import Registry
from envmatrix.reporting.hosts import HOST_COLUMNS, algorithms_line, host_cells, host_rows
from envmatrix.reporting.matrix import Matrix
from envmatrix.reporting.text import MdCell, md_code, md_table, md_text
from envmatrix.results import ProbeResult


def render_markdown(matrix: Matrix, results: Sequence[ProbeResult], title: str) -> str:
    columns = [f"({c})" for c in matrix.columns]
    out = [f"# {md_text(title)}", "", "1 = every rank passed init and the value-checked collectives; 0 = failure; "
           "s = slow (correct, but below an expected busbw or above an expected time: measured / expected under Failures); "
           "? = unresolved (the probe could not test: exit 125); - = not run.", ""]
    out.append(md_table(["grid", *columns], [[row, *(matrix.cell(row, c) for c in matrix.columns)] for row in matrix.rows]))
    placed = {r.grid: r.placement for r in results if r.placement.get("emulated_hosts") or r.shared_gpu}
    if placed:  # where emulated hosts ran: a shared GPU's cells show pass/fail and transport, not bandwidth
        out += ["", "## Placement (emulated hosts)", ""]
        out.append(md_table(["grid", "placement", "hosts"],
                            [[g, p.get("label"), ", ".join(p.get("emulated_hosts") or [])] for g, p in placed.items()]))
    out += ["", "## Setups", "", md_table(["setup", "env (diff against the first setup)"],
                                          [[f"({name})", MdCell(md_code(env))] for name, env in matrix.legend])]
    if any(r.nccl.get("transport") for r in results):
        def transport(row: str, column: str) -> str:  # the matrix's own cell: a column may be "setup @ condition"
            cell = matrix.cells.get((row, column))
            return (cell.nccl.get("transport") if cell is not None else "") or "-"

        out += ["", "## Transport per cell (from NCCL's log)", ""]
        out.append(md_table(["grid", *columns], [[row, *(transport(row, c) for c in matrix.columns)] for row in matrix.rows]))
    algorithms = [(r, algorithms_line(r.nccl or {})) for r in results]
    if any(line for _, line in algorithms):
        out += ["", "## Algorithm and protocol per collective (NCCL TUNING lines, rank 0)", ""]
        out.append(md_table(["setup", "grid", "ran"], [[f"({r.column})", r.grid, line] for r, line in algorithms if line]))
    if matrix.failures:
        out += ["", "## Failures", ""]
        out.append(md_table(["setup", "grid", "class", "rank", "host", "root cause"],
                            [[f"({f.setup})", f.grid, f.outcome, "" if f.rank is None else f.rank, f.host or "", f.line[:300]]
                             for f in matrix.failures]))
    hosts = host_rows(results)
    if hosts:
        out += ["", "## Hosts", "", md_table(HOST_COLUMNS, [host_cells(row) for row in hosts])]
    if any(r.metrics for r in results):
        from envmatrix.reporting.bench_tables import busbw_by_setup, shared_gpu_note

        for grid in matrix.rows:
            header, rows = busbw_by_setup(results, grid)
            note = shared_gpu_note([r for r in results if r.grid == grid])
            if rows:
                out += ["", f"## busbw on {grid} (largest size benched)" + (f": {md_text(note)}" if note else ""), "",
                        md_table(header, rows)]
    versions = next((r.versions for r in results if r.versions), {})
    if versions:
        out += ["", "## Versions", ""] + [f"- {md_text(k)}: {md_text(v)}" for k, v in sorted(versions.items())]
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
