"""Bench tables (pure): nccl-tests-like rows, busbw vs size (seed 002), busbw per setup (seed 003)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from envmatrix.bench.aggregate import headline_bw, headline_rows
from envmatrix.bench.sizes import format_size
from envmatrix.reporting.text import md_code, md_table, md_text
from envmatrix.results import ProbeResult

NCCL_TESTS_COLUMNS = ("size (B)", "count", "type", "time (us)", "min", "median", "max", "algbw (GB/s)", "busbw (GB/s)", "#wrong")


def _f(value: Optional[float], digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


NOT_REPRESENTATIVE = "not representative"


def shared_gpu_note(results: Sequence[ProbeResult]) -> str:
    """The mark every bandwidth table of shared-GPU runs carries ("" when none shared): emulated hosts on one GPU
    show pass/fail and transport as on a cluster, their busbw is the one GPU's, split."""
    labels = list(dict.fromkeys(str(r.placement.get("label")) for r in results if r.shared_gpu))
    if not labels:
        return ""
    return f"bandwidth {NOT_REPRESENTATIVE}: ranks shared GPUs as emulated hosts ({'; '.join(labels)})"


def timing_label(metrics: Sequence[dict[str, Any]], collective: Optional[str] = None) -> str:
    """Which timing produced these numbers (envmatrix/bench/timing.py), so no table hides it."""
    found = dict.fromkeys(m.get("timing") or "unrecorded" for m in metrics if collective in (None, m["collective"]))
    return "timing: " + ", ".join(found)


def collective_title(metrics: Sequence[dict[str, Any]], collective: str) -> str:
    rows = [m for m in headline_rows(metrics) if m["collective"] == collective]
    placement = "in-place" if rows and all(m.get("in_place") for m in rows) else "out-of-place"
    return f"{collective} ({placement}, {timing_label(metrics, collective)})"


def nccl_tests_rows(metrics: Sequence[dict[str, Any]], collective: str) -> list[tuple[str, ...]]:
    rows = [m for m in headline_rows(metrics) if m["collective"] == collective]
    return [
        (
            str(m["size_bytes"]),
            str(m.get("count", "")),
            str(m.get("dtype", "")),
            _f(m["time_us"], 1),
            _f(m.get("time_min_us"), 1),
            _f(m.get("time_median_us"), 1),
            _f(m.get("time_max_us"), 1),
            _f(m["algbw_gbps"]),
            _f(m.get("busbw_gbps")),
            "N/A" if m.get("wrong") is None else str(m["wrong"]),
        )
        for m in sorted(rows, key=lambda m: m["size_bytes"])
    ]


def busbw_by_size(metrics: Sequence[dict[str, Any]]) -> tuple[list[str], list[tuple[str, ...]]]:
    """Seed 002's form: rows = message size, columns = collectives, cells = busbw (algbw when undefined)."""
    collectives = list(dict.fromkeys(m["collective"] for m in metrics))
    cell = {(m["collective"], m["size_bytes"]): m for m in headline_rows(metrics)}
    sizes = sorted({m["size_bytes"] for m in metrics})
    rows = []
    for size in sizes:
        values = []
        for c in collectives:
            m = cell.get((c, size))
            values.append("-" if m is None else _f(headline_bw(m)))
        rows.append((format_size(size), *values))
    return ["size", *collectives], rows


def busbw_by_setup(results: Sequence[ProbeResult], grid: str, size: Optional[int] = None) -> tuple[list[str], list[tuple[str, ...]]]:
    """Seed 003's busbw table for one grid: rows = collectives, columns = setups (each network condition its own
    column), at ``size`` (default: largest)."""
    chosen = [r for r in results if r.grid == grid and r.metrics]
    setups = list(dict.fromkeys(r.column for r in chosen))
    collectives = list(dict.fromkeys(m["collective"] for r in chosen for m in r.metrics))
    rows = []
    for c in collectives:
        values = []
        for s in setups:
            ms = [m for r in chosen if r.column == s for m in headline_rows(r.metrics) if m["collective"] == c]
            if size is not None:
                ms = [m for m in ms if m["size_bytes"] == size]
            best = max(ms, key=lambda m: m["size_bytes"], default=None)
            values.append("-" if best is None else _f(headline_bw(best)))
        rows.append((c, *values))
    return ["busbw (GB/s)", *[f"({s})" for s in setups]], rows


markdown_table = md_table  # bench's tables are Markdown tables like every other report's


def bench_markdown(result: ProbeResult, title: str) -> str:
    out = [f"# {md_text(title)}", ""]
    env = "; ".join(f"{a['var']}={a['value']}" if a["op"] == "set" else f"{a['op']} {a['var']} {a['value']}" for a in result.setup.get("atoms", []))
    out += [f"setup ({md_text(result.setup_name)}): {md_code(env or 'inherited env only', in_table=False)}; grid {result.grid}; "
            f"backend {result.backend}; outcome {result.outcome}", ""]
    if result.placement:
        note = shared_gpu_note([result])
        out += [f"placement: {md_text(result.placement.get('label'))}" + (f"; **{md_text(note)}**" if note else ""), ""]
    if result.versions:
        out += ["versions: " + md_text(", ".join(f"{k} {v}" for k, v in sorted(result.versions.items()))), ""]
    for collective in dict.fromkeys(m["collective"] for m in result.metrics):
        out += [f"## {collective_title(result.metrics, collective)}, time averaged over ranks", "", markdown_table(NCCL_TESTS_COLUMNS, nccl_tests_rows(result.metrics, collective)), ""]
    if result.metrics:
        header, rows = busbw_by_size(result.metrics)
        out += [f"## busbw (GB/s) vs message size ({timing_label(result.metrics)})", "", markdown_table(header, rows), ""]
    if result.thresholds:
        out += ["## expectations (measured / expected)", "", markdown_table(*threshold_rows(result.thresholds)), ""]
    if not result.passed:
        out += [f"failure: {result.outcome}: {md_text(result.root_cause.get('line'))}", ""]
    return "\n".join(out)


def threshold_rows(checks: Sequence[dict[str, Any]]) -> tuple[list[str], list[tuple[str, ...]]]:
    """One row per expectation that applied (thresholds.Check.to_json), for every report that shows them."""
    verdicts = {True: "met", False: "SLOW", None: "not measured"}
    return ["check", "verdict"], [(str(c.get("line")), verdicts[c.get("met")]) for c in checks]
