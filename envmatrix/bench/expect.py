"""What a measured cell is expected to reach (pure): a busbw floor or a time ceiling per collective and size.

The model the layers share: envmatrix.config.expect builds it from a config's ``expect:`` block,
envmatrix.judgement.thresholds judges results against it and builds it from a recorded baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from envmatrix.results import ProbeResult

BUSBW = "busbw_gbps"  # a floor: measured below it is slow
TIME = "time_us"  # a ceiling: measured above it is slow
METRICS = {BUSBW: "GB/s", TIME: "us"}


@dataclass(frozen=True)
class Expectation:
    collective: str
    size_bytes: int
    metric: str  # BUSBW or TIME
    value: float
    grid: Optional[str] = None  # None: every grid
    setup: Optional[str] = None  # None: every setup (a baseline names its own)
    backend: Optional[str] = None
    source: str = "expect"  # where the number came from, shown next to it

    def applies_to(self, result: ProbeResult) -> bool:
        return all(want in (None, have) for want, have in
                   ((self.grid, result.grid), (self.setup, result.setup_name), (self.backend, result.backend)))


def unmeasured_warning(expectations: Sequence[Expectation], bench: Any, probe: str,
                       worlds: Mapping[str, int]) -> Optional[str]:
    """The warning line when some of the config's expectations can never be judged: the builtin probe has no bench,
    or its bench never measures that collective at that size (they would be stored as "not measured" and pass).
    None when all are measured, or when the probe's output is known only once it runs (a command probe).
    ``worlds``: grid label -> ranks, for expectations of one grid (a baseline's floors are at measured sizes)."""
    from envmatrix.bench.sizes import format_size

    if probe != "builtin" or not expectations:
        return None
    if not isinstance(bench, Mapping):
        some = "1 expectation" if len(expectations) == 1 else f"{len(expectations)} expectations"
        return (f"warning: expect: {some}, but probe.bench is not set, so the probe measures nothing and none is "
                "judged; add probe.bench (its collectives and sizes) to judge them")
    missed = [e for e in expectations if e.collective not in bench["collectives"] or not _swept(e, bench, worlds)]
    if not missed:
        return None
    first = missed[0]
    more = f" (and {len(missed) - 1} more)" if len(missed) > 1 else ""
    return (f"warning: expect: {first.collective} {format_size(first.size_bytes)}{more} is not measured by probe.bench "
            f"({', '.join(bench['collectives'])} at {format_size(min(bench['sizes']))}-{format_size(max(bench['sizes']))}),"
            " so it judges nothing; allowed: a collective and size the bench sweeps")


def _swept(exp: Expectation, bench: Mapping[str, Any], worlds: Mapping[str, int]) -> bool:
    """Whether the bench measures ``exp``'s size: as swept, or as a swept size is measured on the expectation's grid
    (a baseline's floors hold the measured 2046 B of a 2K alltoall on 3 ranks)."""
    from envmatrix.bench.sizes import measured_bytes

    if exp.size_bytes in bench["sizes"]:
        return True
    if exp.grid not in worlds:
        return False
    ranks = worlds[exp.grid]
    return any(measured_bytes(exp.collective, s, bench.get("dtype"), ranks) == exp.size_bytes for s in bench["sizes"])
