#!/usr/bin/env python3
"""Side-by-side envmatrix vs nccl-tests table: medians over repeats, time ratio, pass/miss per target.

Usage: python benchmarks/fidelity_table.py GRID MEASURED_GLOB NCCL_TESTS_GLOB [MODE]
  e.g. python benchmarks/fidelity_table.py 1x2 'fid/em_host_r*' 'fid/nt_mpi-default_r*_*.txt' "host vs default"
MEASURED_GLOB: envmatrix bench run directories (results.sqlite each), or nccl-tests stdout files to compare one
nccl-tests layout with another (-g 2 in one process vs mpirun -np 2 -g 1); NCCL_TESTS_GLOB: nccl-tests stdout files.
Target (issue 16): median envmatrix time / median nccl-tests time within 0.95-1.05 at >= 64 KiB, 0.90-1.10 below.

Several machines: python benchmarks/fidelity_table.py GRID MEASURED_GLOB NCCL_TESTS_GLOB MODE --strata DIR_GLOB
  each directory DIR_GLOB matches is one machine (one device call's raw/), the two globs taken inside it. Why
  (issue 40): a lent VM's small-message time sits at one level for every process of both tools (7 us at 8 B on one
  H100 pair, 11-13 us on another), so processes pooled across machines give each side a two-humped sample whose
  median falls between the humps by chance; the ratio is taken within each machine, where both tools were
  interleaved, and the machines' ratios are combined (geometric mean weighted by processes).
"""

from __future__ import annotations

import glob
import json
import os
import math
import random
import re
import sqlite3
import statistics
import sys

from envmatrix.bench.sizes import format_size
from envmatrix.parsers.nccl_tests import parse_stdout

SMALL_BELOW = 64 << 10
# nccl-tests' short names for the collectives envmatrix reports
NAMES = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reduce_scatter", "alltoall": "alltoall", "broadcast": "broadcast"}

Samples = dict[tuple[str, int], list[tuple[float, float]]]  # (collective, size) -> [(time_us, busbw), ...]


def target_band(size_bytes: int) -> tuple[float, float]:
    return (0.95, 1.05) if size_bytes >= SMALL_BELOW else (0.90, 1.10)


def verdict(ratio: float, size_bytes: int) -> str:
    lo, hi = target_band(size_bytes)
    return "pass" if lo <= ratio <= hi else "MISS"


def envmatrix_samples(pattern: str) -> tuple[Samples, set[str]]:
    found: Samples = {}
    timings: set[str] = set()
    for run_dir in sorted(glob.glob(pattern)):
        with sqlite3.connect(f"{run_dir}/results.sqlite") as db:
            for collective, size, time_us, busbw, row_json in db.execute("SELECT collective, size_bytes, time_us, busbw_gbps, row_json FROM metrics"):
                found.setdefault((collective, size), []).append((time_us, busbw))
                row = json.loads(row_json)
                # capture only means something for graph rows: host rows say "-" there, a missing key "unrecorded"
                fields = [row.get(k) for k in ("timing", "launch", "buffers")] + [row.get("capture") if row.get("timing") == "graph" else "-"]
                if row.get("timing") == "host":  # host rows from 2026-11-24 10:00 on: compiled or python launch loop
                    fields.append(row.get("loop"))
                timings.add("/".join(str(v or "unrecorded") for v in fields))
    return found, timings


def nccl_tests_samples(pattern: str) -> Samples:
    found: Samples = {}
    for path in sorted(glob.glob(pattern)):
        hint = re.search(r"_r\d+_(\w+?)(?:\.txt)?$", path)  # nt_<mode>_r<N>_<binary>.txt names the binary
        with open(path) as fh:
            report = parse_stdout(fh.read(), hint.group(1) if hint else None)
        name = NAMES.get(report.collective, report.collective)
        for row in report.rows:
            if not row.in_place:  # envmatrix measures out-of-place
                found.setdefault((name, row.size_bytes), []).append((row.time_us, row.busbw_gbps))
    return found


def ratio_interval(got: list[float], ref: list[float], draws: int = 2000, seed: int = 40) -> tuple[float, float]:
    """95% bootstrap interval of median(got) / median(ref), each side resampled over its processes: with one window
    per process and a per-process spread of 10-30 % at small sizes (fidelity_h100x2.md), it says whether a cell
    outside the band is outside it beyond what the processes sampled can tell."""
    rng = random.Random(seed)
    ratios = sorted(statistics.median(rng.choices(got, k=len(got))) / statistics.median(rng.choices(ref, k=len(ref)))
                    for _ in range(draws))
    return ratios[int(0.025 * draws)], ratios[int(0.975 * draws) - 1]


def self_ratio(ref: list[float]) -> str:
    """The reference against itself: its even-numbered processes' median over its odd-numbered ones'."""
    odd, even = ref[0::2], ref[1::2]
    return f"{statistics.median(even) / statistics.median(odd):.2f}" if odd and even else "-"


def _runs(xs: list[float], digits: int) -> str:
    return "/".join(f"{x:.{digits}f}" for x in xs)


def table(grid: str, ours: Samples, theirs: Samples, mode: str = "") -> tuple[str, int, int]:
    """Markdown rows for every (collective, size) both sides measured; returns (text, passes, misses)."""
    lines = [
        "| mode | grid | collective | size | nccl-tests time us (runs) | envmatrix time us (runs) | time ratio | ratio 95% CI "
        "| nccl-tests even/odd | busbw nccl-tests / envmatrix | target | result |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    passes = misses = 0
    for key in sorted(theirs, key=lambda k: (list(NAMES.values()).index(k[0]) if k[0] in NAMES.values() else 99, k[1])):
        if key not in ours:
            continue
        ref_t = [t for t, _ in theirs[key]]
        got_t = [t for t, _ in ours[key]]
        ratio = statistics.median(got_t) / statistics.median(ref_t)
        ref_bw = statistics.median(b for _, b in theirs[key])
        got_bw = [b for _, b in ours[key] if b is not None]
        lo, hi = target_band(key[1])
        low, high = ratio_interval(got_t, ref_t)
        result = verdict(ratio, key[1])
        passes, misses = passes + (result == "pass"), misses + (result != "pass")
        bw = f"{ref_bw:.2f} / {statistics.median(got_bw):.2f}" if got_bw else f"{ref_bw:.2f} / -"
        lines.append(
            f"| {mode} | {grid} | {key[0]} | {format_size(key[1])} | {statistics.median(ref_t):.1f} ({_runs(ref_t, 1)}) | "
            f"{statistics.median(got_t):.1f} ({_runs(got_t, 1)}) | {ratio:.3f} | {low:.2f}-{high:.2f} | {self_ratio(ref_t)} | "
            f"{bw} | {lo:.2f}-{hi:.2f} | {result} |"
        )
    return "\n".join(lines), passes, misses


Stratum = tuple[str, Samples, Samples]  # (machine, envmatrix samples, nccl-tests samples)


def _combined(strata: list[tuple[list[float], list[float]]]) -> float:
    """Geometric mean of the per-machine ratios of medians, each weighted by its processes (the fewer side's)."""
    weights = [min(len(got), len(ref)) for got, ref in strata]
    logs = [math.log(statistics.median(got) / statistics.median(ref)) for got, ref in strata]
    return math.exp(sum(w * x for w, x in zip(weights, logs)) / sum(weights))


def stratified_table(grid: str, strata: list[Stratum], mode: str = "", draws: int = 2000, seed: int = 40) -> tuple[str, int, int]:
    """Markdown rows for every (collective, size) measured by both tools on some machine: each machine's ratio (with
    its processes per side), the combined ratio and its 95% interval, processes resampled within their machine."""
    names = [name for name, _, _ in strata]
    lines = [f"| mode | grid | collective | size | {' | '.join(f'{n}: ratio (processes)' for n in names)} "
             "| combined ratio | 95% CI | target | result |",
             "| --- | --- | --- | --- | " + "--- | " * len(names) + "--- | --- | --- | --- |"]
    keys = {k for _, ours, theirs in strata for k in theirs if k in ours}
    order = lambda k: (list(NAMES.values()).index(k[0]) if k[0] in NAMES.values() else 99, k[1])  # noqa: E731
    rng, passes, misses = random.Random(seed), 0, 0
    for key in sorted(keys, key=order):
        pairs = [([t for t, _ in ours[key]], [t for t, _ in theirs[key]]) if key in ours and key in theirs else None
                 for _, ours, theirs in strata]
        present = [p for p in pairs if p]
        ratio = _combined(present)
        boot = sorted(_combined([(rng.choices(g, k=len(g)), rng.choices(r, k=len(r))) for g, r in present])
                      for _ in range(draws))
        lo, hi = target_band(key[1])
        result = verdict(ratio, key[1])
        passes, misses = passes + (result == "pass"), misses + (result != "pass")
        cells = [f"{statistics.median(p[0]) / statistics.median(p[1]):.3f} ({min(len(p[0]), len(p[1]))})" if p else "-"
                 for p in pairs]
        lines.append(f"| {mode} | {grid} | {key[0]} | {format_size(key[1])} | {' | '.join(cells)} | {ratio:.3f} | "
                     f"{boot[int(0.025 * draws)]:.2f}-{boot[int(0.975 * draws) - 1]:.2f} | {lo:.2f}-{hi:.2f} | {result} |")
    return "\n".join(lines), passes, misses


def repeat_counts(ours: Samples, theirs: Samples) -> tuple[list[int], int]:
    """Sizes meeting the target for each envmatrix repeat alone (against nccl-tests' median) and for minimum against
    minimum: on the 2xH200 box every process settles in a fast or a slow state (benchmarks/fidelity_h200.md, 2026-11-24),
    so a median of few repeats can be one slow process; these say whether the method or the process missed."""
    keys = [k for k in theirs if k in ours]
    repeats = max((len(ours[k]) for k in keys), default=0)
    per_repeat = [sum(verdict(ours[k][i][0] / statistics.median(t for t, _ in theirs[k]), k[1]) == "pass"
                      for k in keys if len(ours[k]) > i) for i in range(repeats)]
    best = sum(verdict(min(t for t, _ in ours[k]) / min(t for t, _ in theirs[k]), k[1]) == "pass" for k in keys)
    return per_repeat, best


def measured_samples(pattern: str) -> tuple[Samples, set[str]]:
    paths = glob.glob(pattern)
    if paths and all(p.endswith(".txt") for p in paths):
        return nccl_tests_samples(pattern), {"nccl-tests"}
    return envmatrix_samples(pattern)


def main_strata(grid: str, ours_glob: str, theirs_glob: str, mode: str, strata_glob: str) -> None:
    strata = [(os.path.basename(d.rstrip("/")) or d, measured_samples(os.path.join(d, ours_glob))[0],
               nccl_tests_samples(os.path.join(d, theirs_glob))) for d in sorted(glob.glob(strata_glob))]
    text, passes, misses = stratified_table(grid, strata, mode)
    print(text)
    print(f"\n{mode or 'all'}: {passes} pass, {misses} miss, ratio within each of {len(strata)} machines, combined")


if __name__ == "__main__":
    if "--strata" in sys.argv:
        at = sys.argv.index("--strata")
        main_strata(*sys.argv[1:5], sys.argv[at + 1])
        sys.exit(0)
    grid, ours_glob, theirs_glob = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) > 4 else ""
    ours, timings = measured_samples(ours_glob)
    text, passes, misses = table(grid, ours, nccl_tests_samples(theirs_glob), mode)
    print(text)
    print(f"\n{mode or 'all'}: {passes} pass, {misses} miss (measured side's timing/launch/buffers/capture: {', '.join(sorted(timings)) or 'none'})")
    per_repeat, best = repeat_counts(ours, nccl_tests_samples(theirs_glob))
    print(f"{mode or 'all'}: each repeat alone {per_repeat} pass; minimum vs minimum {best} pass (of {passes + misses})")
