#!/usr/bin/env python3
"""Side-by-side busbw table: envmatrix bench stores vs nccl-tests stdout, medians over repeats.

Usage: python bench/fidelity_table.py GRID ENVMATRIX_GLOB NCCL_TESTS_GLOB
  e.g. python bench/fidelity_table.py 1x4 'bench/results/h200_fidelity/run4_1x4/envmatrix_r*' \
       'bench/results/h200_fidelity/run4_1x4/nt_r*_*.txt'
"""

from __future__ import annotations

import glob
import sqlite3
import statistics
import sys

from envmatrix.bench.sizes import format_size
from envmatrix.parsers.nccl_tests import parse_stdout


def envmatrix_busbw(pattern: str) -> dict[tuple[str, int], list[float]]:
    found: dict[tuple[str, int], list[float]] = {}
    for run_dir in sorted(glob.glob(pattern)):
        with sqlite3.connect(f"{run_dir}/results.sqlite") as db:
            for collective, size, busbw in db.execute("SELECT collective, size_bytes, busbw_gbps FROM metrics"):
                found.setdefault((collective, size), []).append(busbw)
    return found


def nccl_tests_busbw(pattern: str) -> dict[tuple[str, int], list[float]]:
    found: dict[tuple[str, int], list[float]] = {}
    for path in sorted(glob.glob(pattern)):
        with open(path) as fh:
            report = parse_stdout(fh.read())
        for row in report.rows:
            if not row.in_place:  # envmatrix measures out-of-place
                found.setdefault((report.collective, row.size_bytes), []).append(row.busbw_gbps)
    return found


def table(grid: str, ours: dict, theirs: dict) -> str:
    lines = [
        f"| grid | collective | size | nccl-tests busbw (runs) | envmatrix busbw (runs) | ratio of medians |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key in sorted(theirs):
        if key not in ours:
            continue
        ref, got = statistics.median(theirs[key]), statistics.median(ours[key])
        runs = lambda xs: ", ".join(f"{x:.1f}" for x in xs)  # noqa: E731
        lines.append(f"| {grid} | {key[0]} | {format_size(key[1])} | {ref:.1f} ({runs(theirs[key])}) | {got:.1f} ({runs(ours[key])}) | {got / ref:.3f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    grid, ours_glob, theirs_glob = sys.argv[1:4]
    print(table(grid, envmatrix_busbw(ours_glob), nccl_tests_busbw(theirs_glob)))
