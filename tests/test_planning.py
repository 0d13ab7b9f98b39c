import pytest

from envmatrix.env import Atom, Setup
from envmatrix.errors import ConfigError, PlanError
from envmatrix.planning import Grid, ProbeSpec, auto_grids, parse_grid, parse_grids, plan_runs
from envmatrix.planning.grid import check_fits, is_this_host


@pytest.mark.parametrize("text,grid", [("1x4", Grid(1, 4)), ("2X2", Grid(2, 2)), (" 4x1 ", Grid(4, 1))])
def test_parse_grid(text, grid):
    assert parse_grid(text) == grid


@pytest.mark.parametrize("bad", ["2x", "x2", "0x4", "2x0", "2*2", "two"])
def test_bad_grid_is_one_line_error(bad):
    with pytest.raises(ConfigError) as err:
        parse_grid(bad, "grids[0]")
    assert "\n" not in str(err.value) and "NxP" in str(err.value)


def test_parse_grids_keeps_order_and_refuses_a_repeat():
    assert parse_grids(["2x2", "1x2", "4x1"]) == [Grid(2, 2), Grid(1, 2), Grid(4, 1)]
    with pytest.raises(ConfigError, match=r"grids\[2\]: '2x2' is listed twice"):
        parse_grids(["2x2", "1x2", "2x2"])


def test_auto_grids_from_hardware():
    assert auto_grids(4) == [Grid(1, 4), Grid(2, 2), Grid(4, 1)]
    assert auto_grids(0) == [Grid(1, 2), Grid(2, 1), Grid(2, 2)]
    assert auto_grids(1) == [Grid(1, 1)]


def test_auto_grids_across_hosts_never_ask_for_more_nodes_than_hosts():
    assert auto_grids(4, hosts=2) == [Grid(1, 4), Grid(2, 1), Grid(2, 4)]
    assert auto_grids(0, hosts=3) == [Grid(1, 2), Grid(3, 1), Grid(3, 2)]
    assert auto_grids(1, hosts=2) == [Grid(1, 1), Grid(2, 1)]
    assert auto_grids(4, hosts=1) == auto_grids(4)  # one host: the local grids


def test_grid_that_does_not_fit_is_plan_error():
    with pytest.raises(PlanError, match="2x4 needs 8 GPUs.*4 are visible"):
        check_fits([Grid(2, 4)], "nccl", 4, 16)
    check_fits([Grid(2, 4)], "gloo", 0, 16)
    with pytest.raises(PlanError, match="max_local_ranks"):
        check_fits([Grid(8, 4)], "gloo", 0, 16)


# Nodes on other hosts (a launcher given hosts): each node holds ppn ranks, one node per host.
TWO_HOSTS = ("node01", "node02")


def test_grid_across_hosts_needs_ppn_gpus_per_node_not_world_gpus_here():
    check_fits([Grid(2, 2)], "nccl", 2, 16, TWO_HOSTS, "driver")  # seed 003's 2x2 on two 2-GPU nodes
    check_fits([Grid(2, 2)], "nccl", 2, 16, TWO_HOSTS, "node01")  # the driver is node 0
    with pytest.raises(PlanError) as err:
        check_fits([Grid(2, 4)], "nccl", 2, 16, TWO_HOSTS, "driver")
    assert str(err.value) == ("grids: 2x4 needs 4 GPUs per node for NCCL (one rank per GPU) but 2 are visible on "
                              "this host, taken as each node's count; allowed: grids with ppn <= 2")


def test_gpu_less_driver_elsewhere_refuses_nothing_on_gpu_count():
    check_fits([Grid(2, 8)], "nccl", 0, 16, TWO_HOSTS, "login1")  # a login node cannot see the nodes' GPUs
    with pytest.raises(PlanError, match="needs 1 GPUs per node .* 0 are visible"):  # ... but it can see its own
        check_fits([Grid(2, 1)], "nccl", 0, 16, ("login1.cluster", "node02"), "login1")


def test_gloo_bound_applies_per_node_across_hosts():
    check_fits([Grid(2, 2)], "gloo", 0, 2, TWO_HOSTS, "driver")
    with pytest.raises(PlanError, match="2x3 starts 3 gloo ranks per node; allowed at most 2"):
        check_fits([Grid(2, 3)], "gloo", 0, 2, TWO_HOSTS, "driver")


@pytest.mark.parametrize("backend", ["nccl", "gloo"])
def test_grid_with_more_nodes_than_hosts_is_refused_once_at_plan_time(backend):
    with pytest.raises(PlanError) as err:
        check_fits([Grid(3, 1)], backend, 8, 16, TWO_HOSTS, "driver")
    assert str(err.value) == ("grids: 3x1 needs 3 hosts but 2 are given (node01,node02); "
                              "allowed: grids with nodes <= 2, or emulate: true")


def test_ranks_on_this_host_keep_the_whole_world_checks():
    with pytest.raises(PlanError, match="2x2 needs 4 GPUs for NCCL .* but 2 are visible"):
        check_fits([Grid(2, 2)], "nccl", 2, 16, (), "node01")
    with pytest.raises(PlanError, match="2x2 starts 4 gloo ranks on this host; allowed at most 2"):
        check_fits([Grid(2, 2)], "gloo", 0, 2)


@pytest.mark.parametrize("host,here,same", [("node01", "node01", True), ("node01.ib.cluster", "node01", True),
                                            ("NODE01", "node01.cluster", True), ("localhost", "x", True),
                                            ("127.0.0.1", "x", True), ("node02", "node01", False), ("node01", "", False)])
def test_is_this_host(host, here, same):
    assert is_this_host(host, here) is same


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
