"""What a measured cell is expected to reach (pure): a busbw floor or a time ceiling per collective and size.

The model the layers share: envmatrix.config.expect builds it from a config's ``expect:`` block,
envmatrix.judgement.thresholds judges results against it and builds it from a recorded baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

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
