"""Seed 000's and seed 001's tables from stored results: rows = network conditions, one block per pattern.

Columns are size, then node count (with ranks per node where a grid has more than one), then backend, each shown
only where the block's results differ in it: seed 000's p2p block comes out as ``gloo 64M | nccl 64M | gloo 128M
| nccl 128M``, seed 001's allreduce block as ``256M 4 nodes | 256M 8 nodes | ...``, grids 2x1 and 2x2 as
``2 nodes x 1 ppn | 2 nodes x 2 ppn``. A cell is the time per synchronisation (median of the iterations; min and
max are kept in the CSV and the HTML table), with the floor S/R of a rate condition beside it and the physics
check's flag (judgement.physics) where it fails. Pure: results in, text out.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Optional, Sequence

from envmatrix.bench.aggregate import headline_rows
from envmatrix.bench.formulas import ALL
from envmatrix.bench.sizes import format_size
from envmatrix.judgement import physics
from envmatrix.results import ProbeResult

SEED_PATTERNS = ("p2p", "allreduce", "ps_central", "ps_sharded")
# every timed pattern a bench under --network can run, seeds 000/001's first: `bench --peers rail,cross` under a rate
# (seed 002 under seed 000's conditions) had its cells judged but no table ("No passed p2p, allreduce ... rows").
# Not the pair patterns: one row per host pair, they have their own tables (bench --pairs, which refuses --network)
PATTERNS = SEED_PATTERNS + tuple(name for name, spec in ALL.items() if name not in SEED_PATTERNS and not spec.pairwise)


@dataclass(frozen=True)
class ConditionCell:
    pattern: str
    condition: str  # name
    value: str  # Condition.describe()
    backend: str
    size_bytes: int
    nodes: int
    grid: str
    median_s: float
    min_s: float
    max_s: float
    check: physics.PhysicsCheck
    run_key: str
    sent_bytes: int  # through the shaped qdiscs, all links; 0 with a rate shaped = traffic went another way

    @property
    def column(self) -> tuple[int, int, int, str]:
        """(size, nodes, ranks per node, backend): 2x1 and 2x2 are two columns, not one cell overwriting the other."""
        return (requested_size(self.size_bytes, self.grid), self.nodes, int(self.grid.partition("x")[2] or 1),
                self.backend)


def requested_size(size_bytes: int, grid: str) -> int:
    """The size asked for: a pattern that splits its buffer over the ranks (ps_sharded) runs a whole number of
    elements per rank, a few bytes under it at a world that is not a power of two (16M over 3 ranks: 16777212);
    its column is the asked size's, as the other patterns' (the CSV keeps the bytes that ran)."""
    nodes, _, ppn = grid.partition("x")
    slack = int(nodes) * int(ppn or 1) * 8  # at most one element (8 bytes at most) per rank cut off
    asked = -(-size_bytes // 1024) * 1024
    return asked if 0 < asked - size_bytes < slack else size_bytes


@dataclass(frozen=True)
class PatternBlock:
    pattern: str
    conditions: list[tuple[str, str]]  # (name, value), in the order they ran
    columns: list[tuple[int, int, int, str]]
    labels: list[str]
    cells: dict[tuple[str, tuple[int, int, int, str]], ConditionCell]

    def cell(self, condition: str, column: tuple[int, int, int, str]) -> Optional[ConditionCell]:
        return self.cells.get((condition, column))

    @property
    def flagged(self) -> list[ConditionCell]:
        return [c for c in self.cells.values() if c.check.flagged]


def _rate(result: ProbeResult) -> Optional[int]:
    return (result.network.get("condition") or {}).get("rate_bps")


def condition_cells(results: Sequence[ProbeResult], patterns: Sequence[str] = PATTERNS) -> list[ConditionCell]:
    """One cell per (pattern, condition, backend, size, grid) of the passed results; the latest result wins."""
    rows: dict[tuple, tuple[ProbeResult, dict]] = {}
    for result in results:
        if not result.passed and result.outcome != "slow":
            continue
        for m in headline_rows(result.metrics):
            if m.get("collective") not in patterns:
                continue
            key = (m["collective"], result.condition_name, result.backend, int(m["size_bytes"]), result.grid)
            rows[key] = (result, dict(m))
    unshaped = {(p, b, s, g): m for (p, c, b, s, g), (r, m) in rows.items() if _rate(r) is None and not
                (r.network.get("condition") or {}).get("delay_s") and not (r.network.get("condition") or {}).get("loss_pct")}
    cells = []
    for (pattern, _, backend, size, grid), (result, m) in rows.items():
        baseline = unshaped.get((pattern, backend, size, grid)) if _rate(result) else None
        sent = result.network.get("sent_bytes")
        check = physics.check_cell(pattern, size, grid, _rate(result), m, baseline,
                                   None if sent is None else sum(int(v) for v in sent.values()))
        cells.append(ConditionCell(
            pattern, result.condition_name, result.condition_value, backend, size, int(grid.split("x")[0]), grid,
            physics.sync_time_s(m), float(m.get("time_min_us") or m["time_us"]) * 1e-6,
            float(m.get("time_max_us") or m["time_us"]) * 1e-6, check, result.run_key,
            sum(int(v) for v in (result.network.get("sent_bytes") or {}).values())))
    return cells


def pattern_blocks(results: Sequence[ProbeResult], patterns: Sequence[str] = PATTERNS) -> list[PatternBlock]:
    cells = condition_cells(results, patterns)
    blocks = []
    for pattern in [p for p in patterns if any(c.pattern == p for c in cells)]:
        mine = [c for c in cells if c.pattern == pattern]
        conditions = list(dict.fromkeys((c.condition, c.value) for c in mine))
        # unshaped first, then as they ran: seed 000 and 001 both start from the provider's default
        conditions.sort(key=lambda nv: nv[1] != "unshaped")
        columns = sorted({c.column for c in mine})
        blocks.append(PatternBlock(pattern, conditions, columns, _labels(columns),
                                   {(c.condition, c.column): c for c in mine}))
    return blocks


def _labels(columns: Sequence[tuple[int, int, int, str]]) -> list[str]:
    varies = [len({col[i] for col in columns}) > 1 for i in range(4)]
    if not any(varies):
        varies = [True, False, False, False]
    per_node = any(col[2] != 1 for col in columns)  # seed 001 is 1 rank per node: its labels stay "4 nodes"
    out = []
    for size, nodes, ppn, backend in columns:
        parts = [format_size(size)] if varies[0] else []
        if varies[1] or varies[2]:
            parts.append(f"{nodes} node{'s' if nodes != 1 else ''}" + (f" x {ppn} ppn" if per_node else ""))
        parts += [backend] if varies[3] else []
        out.append(" ".join(parts))
    return out


def format_time(seconds: float) -> str:
    """Seed 000 writes ms, seed 001 seconds: below a second in ms, else in s."""
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def cell_text(cell: Optional[ConditionCell]) -> str:
    if cell is None:
        return "-"
    text = format_time(cell.median_s)
    if cell.check.bound_s is not None:
        bound = format_time(cell.check.bound_s)
        same_unit = bound.split()[1] == text.split()[1]
        text += f" (S/R {bound.split()[0] if same_unit else bound})"  # "541.0 ms (S/R 536.9)": the cell's unit
    if cell.check.verdict == physics.NOT_IN_EFFECT:
        text += " **shaping not in effect**"
    elif cell.check.verdict == physics.UNDER_FLOOR:
        text += " *under the floor*"
    elif cell.check.verdict == physics.BOX_LIMITED:
        text += " *box-limited*"
    return text


def block_rows(block: PatternBlock) -> tuple[list[str], list[list[str]]]:
    header = ["network condition", "value"] + block.labels
    rows = [[name, value] + [cell_text(block.cell(name, col)) for col in block.columns]
            for name, value in block.conditions]
    return header, rows


def conditions_markdown(results: Sequence[ProbeResult], title: str = "Network conditions") -> str:
    from envmatrix.reporting.bench_tables import markdown_table

    blocks = pattern_blocks(results)
    out = [f"# {title}", ""]
    if not blocks:
        return "\n".join(out + ["No passed bench rows in this run (a pattern's time per synchronisation).", ""])
    out += ["Time per synchronisation: the median of the iterations (min and max in the CSV, "
            "`--format csv`). S/R: the least time the condition's rate allows (judgement/physics.py).", ""]
    for block in blocks:
        out += [f"## {block.pattern}", "", markdown_table(*block_rows(block)), ""]
        for cell in block.flagged:
            label = block.labels[block.columns.index(cell.column)]
            out.append(f"- {cell.condition} / {label}: {cell.check.line}"
                       + (f"; {cell.sent_bytes} bytes went through the shaped qdiscs" if cell.check.bound_s else ""))
        if block.flagged:
            out.append("")
    return "\n".join(out)


CSV_HEADER = ["pattern", "condition", "value", "backend", "size_bytes", "nodes", "grid", "median_s", "min_s",
              "max_s", "floor_s", "unshaped_s", "verdict", "sent_bytes", "run_key"]


def conditions_csv(results: Sequence[ProbeResult]) -> str:
    """One line per cell (long form: every table of the markdown is a pivot of it)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for block in pattern_blocks(results):
        for name, _ in block.conditions:
            for column in block.columns:
                c = block.cell(name, column)
                if c is None:
                    continue
                writer.writerow([c.pattern, c.condition, c.value, c.backend, c.size_bytes, c.nodes, c.grid,
                                 f"{c.median_s:.6f}", f"{c.min_s:.6f}", f"{c.max_s:.6f}",
                                 "" if c.check.bound_s is None else f"{c.check.bound_s:.6f}",
                                 "" if c.check.baseline_s is None else f"{c.check.baseline_s:.6f}",
                                 c.check.verdict, c.sent_bytes, c.run_key])
    return buf.getvalue()
