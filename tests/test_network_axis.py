"""The network axis in configs and on the command line, and what it does to plans and run keys (no processes)."""

from __future__ import annotations

import pytest

from envmatrix.config import compose_config
from envmatrix.config.network import NetworkOptions, network_axis, parse_flags, parse_options
from envmatrix.config.resolve import resolve
from envmatrix.env.atoms import Setup
from envmatrix.errors import ConfigError
from envmatrix.planning.grid import Grid
from envmatrix.planning.plan import ProbeSpec, Run, plan_runs, run_key


def _resolve(tmp_path, text: str):
    conf = tmp_path / "net.yaml"
    conf.write_text(text)
    cfg, conf_file = compose_config([f"conf={conf}"])
    return resolve(cfg, conf_file, gpus=0, pins={})


def test_config_axis_and_options(tmp_path):
    inp = _resolve(tmp_path, "backend: gloo\ngrids: [1x2]\nsetups: {base: {}}\n"
                             "network: {default: {}, d5_b2: {delay: 5ms, rate: 2gbit}}\n"
                             "network_options: {interface: eth1, ingress: true}\n")
    assert [c.name for c in inp.conditions] == ["default", "d5_b2"]
    assert inp.conditions[1].describe() == "rate=2gbit,delay=5ms,ingress=true,interface=eth1"
    assert inp.conditions[0].describe() == "unshaped"  # options never shape the unshaped condition
    assert inp.network_options == NetworkOptions("eth1", False, True)


def test_no_axis_keeps_the_old_plan(tmp_path):
    inp = _resolve(tmp_path, "backend: gloo\ngrids: [1x2]\nsetups: {base: {}}\n")
    assert inp.conditions == ()


@pytest.mark.parametrize("text, needle", [
    ("network: {slow: {rate: 2gbps}}", "net.yaml: network.slow.rate='2gbps'"),
    ("network: {a: {rate: 1gbit}, b: 'rate=1gbit'}", "network.b: rate=1gbit is the same condition as a;"),
    ("network_options: {interfce: eth0}", "network_options: unknown key 'interfce'"),
    ("network_options: {allow_default_route: yes please}", "allow_default_route='yes please': not a boolean"),
])
def test_bad_axis_is_one_line_naming_the_key(tmp_path, text, needle):
    with pytest.raises(ConfigError) as err:
        _resolve(tmp_path, "backend: gloo\ngrids: [1x2]\nsetups: {base: {}}\n" + text + "\n")
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_flags():
    got = parse_flags(["default", "delay=5ms,rate=2gbit", "b1:rate=1gbit"])
    assert list(got) == ["default", "rate=2gbit,delay=5ms", "b1"]
    assert got["b1"].rate_bps == 10**9
    with pytest.raises(ConfigError, match="--network 'rate=1gbps'"):
        parse_flags(["rate=1gbps"])
    with pytest.raises(ConfigError, match="given twice"):
        parse_flags(["b:rate=1gbit", "b:rate=2gbit"])


def test_options_fill_conditions():
    conditions = network_axis(parse_flags(["rate=1gbit"]), parse_options({"interface": "ib0"}, "x"), "--network")
    assert conditions[0].interface == "ib0"


def test_run_key_carries_the_shaped_value_only():
    setup, grid, probe = Setup("base"), Grid(2, 1), ProbeSpec.make("builtin", {})
    flags = parse_flags(["default", "b1:rate=1gbit", "b2:rate=2gbit"])
    plain = run_key(setup, grid, probe, "gloo", "mpirun")
    assert run_key(setup, grid, probe, "gloo", "mpirun", flags["default"]) == plain  # old stores still resume
    keys = {run_key(setup, grid, probe, "gloo", "mpirun", c) for c in flags.values()}
    assert len(keys) == 3
    runs = plan_runs([setup], [grid], probe, "gloo", "mpirun", tuple(flags.values()))
    assert [r.network.name for r in runs] == ["default", "b1", "b2"]
    assert runs[1].to_json()["network"] == {"name": "b1", "value": "rate=1gbit"}
    assert isinstance(runs[0], Run) and not runs[0].shaped and runs[1].shaped
