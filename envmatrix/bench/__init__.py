"""Bench math (pure): the busbw formula table, size sweeps and rank-row aggregation."""

from envmatrix.bench.formulas import COLLECTIVES, PATTERNS, bandwidths, collective_spec
from envmatrix.bench.sizes import parse_size, size_sweep, format_size

__all__ = ["COLLECTIVES", "PATTERNS", "bandwidths", "collective_spec", "parse_size", "size_sweep", "format_size"]
