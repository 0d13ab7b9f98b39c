#!/usr/bin/env python3
"""Per-process small-message times of envmatrix bench and nccl-tests: the spread a few repeats cannot average out.

Usage: python benchmarks/process_spread.py COLLECTIVE MEASURED_GLOB NCCL_TESTS_GLOB [LO HI]
  e.g. python benchmarks/process_spread.py allreduce 'out/em_*' 'out/nt_*_all_reduce_perf.txt'
One envmatrix run directory or one nccl-tests stdout file is one pair of rank processes. For each, the mean
out-of-place time over the sizes LO..HI bytes (default 64 B - 32 KiB) that every run measured; then per side the
count, median and range, and the ratio of the medians (envmatrix / nccl-tests). Why (issue 40): on the 2xH100 box
a process of either tool runs an 8 B allreduce in anything from 8 to 17 us (benchmarks/fidelity_h100x2.md), so a
median of three repeats per side moves by more than the 0.90-1.10 band.
"""

from __future__ import annotations

import glob
import importlib.util
import pathlib
import statistics
import sys

_spec = importlib.util.spec_from_file_location("fidelity_table", pathlib.Path(__file__).with_name("fidelity_table.py"))
ft = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ft)


def run_times(path: str, collective: str) -> dict[int, float]:
    """size -> time (us) of one run: an envmatrix run directory or one nccl-tests stdout file."""
    samples, _ = ft.measured_samples(glob.escape(path))
    return {size: times[0][0] for (name, size), times in samples.items() if name == collective and times}


def common_sizes(paths: list[str], collective: str, lo: int, hi: int) -> set[int]:
    """The sizes in [lo, hi] that every run of ``paths`` measured."""
    runs = [run_times(p, collective) for p in paths]
    return {s for s in set.intersection(*(set(r) for r in runs)) if lo <= s <= hi} if runs else set()


def process_means(paths: list[str], collective: str, sizes: list[int]) -> list[float]:
    """Each run's mean time over ``sizes``."""
    runs = [run_times(p, collective) for p in paths]
    return [statistics.fmean(r[s] for s in sizes) for r in runs]


def spread_line(side: str, means: list[float]) -> str:
    if not means:
        return f"{side}: no runs"
    return (f"{side}: {len(means)} processes, median {statistics.median(means):.1f} us, range {min(means):.1f}-"
            f"{max(means):.1f} ({' / '.join(f'{m:.1f}' for m in means)})")


def main(argv: list[str]) -> int:
    collective, ours_glob, theirs_glob = argv[:3]
    lo, hi = (int(argv[3]), int(argv[4])) if len(argv) > 4 else (64, 32768)
    ours, theirs = sorted(glob.glob(ours_glob)), sorted(glob.glob(theirs_glob))
    # one size set for both sides, so that the two medians average the same sizes
    shared = sorted(common_sizes(ours, collective, lo, hi) & common_sizes(theirs, collective, lo, hi)
                    if theirs else common_sizes(ours, collective, lo, hi))
    if not shared:
        print(f"{collective}: no size in {lo}..{hi} B measured by every run")
        return 1
    em, nt = process_means(ours, collective, shared), process_means(theirs, collective, shared)
    print(f"{collective}, mean over {', '.join(map(str, shared))} B per process:")
    print(spread_line("  envmatrix ", em))
    print(spread_line("  nccl-tests", nt))
    if em and nt:
        print(f"  ratio of medians envmatrix / nccl-tests: {statistics.median(em) / statistics.median(nt):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
