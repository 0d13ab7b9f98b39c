import pytest

from envmatrix.env import Atom, Setup
from envmatrix.errors import ConfigError, PlanError
from envmatrix.planning import Grid, ProbeSpec, auto_grids, parse_grid, parse_grids, plan_runs
from envmatrix.planning.grid import check_fits


@pytest.mark.parametrize("text,grid", [("1x4", Grid(1, 4)), ("2X2", Grid(2, 2)), (" 4x1 ", Grid(4, 1))])
def test_parse_grid(text, grid):
    assert parse_grid(text) == grid


@pytest.mark.parametrize("bad", ["2x", "x2", "0x4", "2x0", "2*2", "two"])
def test_bad_grid_is_one_line_error(bad):
    with pytest.raises(ConfigError) as err:
        parse_grid(bad, "grids[0]")
    assert "\n" not in str(err.value) and "NxP" in str(err.value)


def test_parse_grids_dedupes_and_keeps_order():
    assert parse_grids(["2x2", "1x2", "2x2"]) == [Grid(2, 2), Grid(1, 2)]


def test_auto_grids_from_hardware():
    assert auto_grids(4) == [Grid(1, 4), Grid(2, 2), Grid(4, 1)]
    assert auto_grids(0) == [Grid(1, 2), Grid(2, 1), Grid(2, 2)]
    assert auto_grids(1) == [Grid(1, 1)]


def test_grid_that_does_not_fit_is_plan_error():
    with pytest.raises(PlanError, match="2x4 needs 8 GPUs.*4 are visible"):
        check_fits([Grid(2, 4)], "nccl", 4, 16)
    check_fits([Grid(2, 4)], "gloo", 0, 16)
    with pytest.raises(PlanError, match="max_local_ranks"):
        check_fits([Grid(8, 4)], "gloo", 0, 16)


def test_plan_is_grid_major_with_stable_keys():
    setups = [Setup("a"), Setup("b", (Atom("NCCL_ALGO", value="Ring"),))]
    probe = ProbeSpec.make("builtin", {"timeout_s": 10})
    runs = plan_runs(setups, [Grid(2, 2), Grid(1, 2)], probe, "gloo", "local")
    assert [(r.grid.label, r.setup.name) for r in runs] == [("1x2", "a"), ("1x2", "b"), ("2x2", "a"), ("2x2", "b")]
    again = plan_runs(list(reversed(setups)), [Grid(1, 2), Grid(2, 2)], probe, "gloo", "local")
    assert {r.key for r in runs} == {r.key for r in again}
    assert len({r.key for r in runs}) == 4


def test_key_changes_with_env_probe_and_backend():
    probe = ProbeSpec.make("builtin", {"timeout_s": 10})
    base = plan_runs([Setup("a")], [Grid(1, 2)], probe, "gloo", "local")[0].key
    assert plan_runs([Setup("a", (Atom("X", value="1"),))], [Grid(1, 2)], probe, "gloo", "local")[0].key != base
    assert plan_runs([Setup("a")], [Grid(1, 2)], ProbeSpec.make("builtin", {"timeout_s": 11}), "gloo", "local")[0].key != base
    assert plan_runs([Setup("a")], [Grid(1, 2)], probe, "nccl", "local")[0].key != base
