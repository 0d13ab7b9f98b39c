"""The ``expect:`` block of a config -> expectations (envmatrix.bench.expect), with one-line errors naming the key."""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, Optional

from envmatrix.bench.expect import METRICS, Expectation
from envmatrix.errors import ConfigError, did_you_mean

EXPECT_EXAMPLE = "expect: {allreduce: {64M: {busbw_gbps: 250}}, 1x4: {alltoall: {1G: {time_us: 4000}}}}"
_GRID_KEY = re.compile(r"^\d+x\d+$")


def parse_expect(block: Any, where: str) -> tuple[Expectation, ...]:
    """``expect:`` -> expectations; keys are collectives (every grid) or grid labels holding collectives."""
    if block in (None, {}):
        return ()
    if not isinstance(block, Mapping):
        raise ConfigError(f"{where}: expect: {block!r} is not a mapping; allowed: {EXPECT_EXAMPLE}")
    out: list[Expectation] = []
    for key, value in block.items():
        key = str(key)
        if _GRID_KEY.match(key):
            from envmatrix.planning.grid import parse_grid

            grid = parse_grid(key, f"{where}: expect.{key}").label
            if not isinstance(value, Mapping):
                # a YAML example: Hydra's override grammar refuses keys that start with a digit (1x4, 64M)
                raise ConfigError(f"{where}: expect.{key}: {value!r} is not a mapping; allowed: collectives, e.g. "
                                  f"expect: {{{key}: {{allreduce: {{64M: {{busbw_gbps: 250}}}}}}}}")
            for collective, sizes in value.items():
                out += _collective(str(collective), sizes, f"{where}: expect.{key}", grid)
        else:
            out += _collective(key, value, f"{where}: expect", None)
    return tuple(out)


def _collective(name: str, sizes: Any, where: str, grid: Optional[str]) -> list[Expectation]:
    from envmatrix.bench.formulas import COLLECTIVES
    from envmatrix.bench.sizes import parse_size

    if name not in COLLECTIVES:
        raise ConfigError(f"{where}.{name}: unknown collective{did_you_mean(name, COLLECTIVES)}; allowed: "
                          f"{', '.join(COLLECTIVES)}, or a grid such as 1x4 holding them")
    if not isinstance(sizes, Mapping) or not sizes:
        raise ConfigError(f"{where}.{name}: {sizes!r} is not a mapping of sizes; allowed: e.g. {name}: {{64M: {{busbw_gbps: 250}}}}")
    out = []
    for size_key, spec in sizes.items():
        at = f"{where}.{name}.{size_key}"
        size = parse_size(size_key, at)
        if not isinstance(spec, Mapping) or not spec:
            raise ConfigError(f"{at}: {spec!r} is not a mapping; allowed: {{busbw_gbps: N}} (GB/s floor) or {{time_us: N}} (us ceiling)")
        for metric, value in spec.items():
            if metric not in METRICS:
                raise ConfigError(f"{at}: unknown key {metric!r}{did_you_mean(str(metric), METRICS)}; allowed: "
                                  f"busbw_gbps (GB/s floor), time_us (us ceiling)")
            # .inf passed: a floor no run meets (every cell slow) or a ceiling that judges nothing
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ConfigError(f"{at}.{metric}: {value!r} is not allowed; allowed: a number > 0 ({METRICS[metric]})")
            out.append(Expectation(name, size, metric, float(value), grid=grid))
    return out
