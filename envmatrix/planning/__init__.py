"""Pure planning: what to run. Nothing here starts a process or touches disk."""

from envmatrix.planning.grid import Grid, auto_grids, parse_grid, parse_grids
from envmatrix.planning.plan import ProbeSpec, Run, plan_runs

__all__ = ["Grid", "auto_grids", "parse_grid", "parse_grids", "ProbeSpec", "Run", "plan_runs"]
