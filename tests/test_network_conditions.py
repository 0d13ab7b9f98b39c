"""Network conditions are parsed and validated up front (envmatrix.network.conditions): pure, no kernel."""

from __future__ import annotations

import pytest

from envmatrix.errors import ConfigError
from envmatrix.network.conditions import Condition, parse_condition, parse_network_axis


@pytest.mark.parametrize("spec, rate, delay, jitter, loss, ingress, described", [
    ("delay=5ms,rate=2gbit", 2 * 10**9, 0.005, 0.0, 0.0, False, "rate=2gbit,delay=5ms"),
    ({"delay": "5ms", "rate": "2gbit", "jitter": "1ms", "loss": "0.1%", "ingress": True}, 2 * 10**9, 0.005, 0.001,
     0.1, True, "rate=2gbit,delay=5ms,jitter=1ms,loss=0.1%,ingress=true"),
    ("rate=1Gbit", 10**9, 0.0, 0.0, 0.0, False, "rate=1gbit"),
    ("rate=200mbit", 2 * 10**8, 0.0, 0.0, 0.0, False, "rate=200mbit"),
    ("rate=2.5gbit", 25 * 10**8, 0.0, 0.0, 0.0, False, "rate=2500mbit"),
    ("rate=64bit", 64, 0.0, 0.0, 0.0, False, "rate=64bit"),
    ("delay=500us", None, 0.0005, 0.0, 0.0, False, "delay=500us"),
    ("delay=0.5s", None, 0.5, 0.0, 0.0, False, "delay=500ms"),
    ("loss=1", None, 0.0, 0.0, 1.0, False, "loss=1%"),
    ({"loss": 0.1}, None, 0.0, 0.0, 0.1, False, "loss=0.1%"),
    ("rate=1gbit, ingress = yes", 10**9, 0.0, 0.0, 0.0, True, "rate=1gbit,ingress=true"),
    ({"rate": "5gbit", "interface": "eth1"}, 5 * 10**9, 0.0, 0.0, 0.0, False, "rate=5gbit,interface=eth1"),
])
def test_good_specs_parse_to_their_values_and_canonical_string(spec, rate, delay, jitter, loss, ingress, described):
    c = parse_condition("c", spec, "network.c")
    assert (c.rate_bps, c.delay_s, c.jitter_s, c.loss_pct, c.ingress) == (rate, delay, jitter, loss, ingress)
    assert c.describe() == described
    assert parse_condition("c", described, "again") == c  # the canonical string reads back as the same condition
    assert Condition.from_json(c.to_json()) == c


@pytest.mark.parametrize("key, bad, says", [
    ("rate", "2gb", "allowed units"), ("rate", "fast", "not a quantity"), ("rate", "4bit", "out of range"),
    ("rate", "2mbps", "allowed units"), ("rate", "-1gbit", "not a quantity"), ("rate", "2tbit", "out of range"),
    ("rate", 1000, "allowed units"), ("rate", True, "not a quantity"),
    ("delay", "5", "no unit"), ("delay", "5 min", "allowed units"), ("delay", "11s", "out of range"),
    ("delay", "-5ms", "not a quantity"), ("delay", "soon", "not a quantity"), ("delay", [5], "not a quantity"),
    ("jitter", "1", "no unit"), ("jitter", "20s", "out of range"), ("jitter", "1xs", "allowed units"),
    ("loss", "101%", "out of range"), ("loss", "-1%", "not a quantity"), ("loss", "5ms", "allowed units"),
    ("loss", "lots", "not a quantity"),
    ("ingress", "maybe", "not a boolean"), ("ingress", "2", "not a boolean"), ("ingress", "yesno", "not a boolean"),
    ("interface", "a/b", "not an interface name"), ("interface", "x" * 16, "not an interface name"),
    ("interface", "eth 0", "not an interface name"), ("interface", 3, "not an interface name"),
])
def test_bad_values_are_one_line_errors_naming_where_key_value_and_what_is_allowed(key, bad, says):
    spec = {"rate": "1gbit", "delay": "5ms", key: bad}
    with pytest.raises(ConfigError) as err:
        parse_condition("c", spec, "conf.yaml: network.c")
    message = str(err.value)
    assert "\n" not in message and says in message
    assert message.startswith(f"conf.yaml: network.c.{key}=")


@pytest.mark.parametrize("spec, says", [
    ({"ingress": True}, "applies nothing; set one of rate, delay, loss"),
    ({"delay": "0ms"}, "applies nothing"),
    ({"loss": "0%", "interface": "eth0"}, "applies nothing"),
    ({"jitter": "1ms"}, "jitter needs a delay"),
    ({"rate": "1gbit", "jitter": "1ms"}, "jitter needs a delay"),
    ({"bandwidth": "1gbit"}, "unknown key 'bandwidth'"),
    ({"rates": "1gbit"}, "did you mean rate?"),
    ("delay=5ms,delay=6ms", "given twice"),
    ("delay", "not key=value"),
    ("rate=,delay=5ms", "not key=value"),
    (42, "neither 'key=value,...' nor a mapping"),
])
def test_sets_that_apply_nothing_or_do_not_parse_are_refused(spec, says):
    with pytest.raises(ConfigError) as err:
        parse_condition("c", spec, "network.c")
    assert says in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["", "../x", "-x", "a b", "x" * 101, 3])
def test_condition_names_that_cannot_key_a_run_are_refused(name):
    with pytest.raises(ConfigError, match="condition name"):
        parse_condition(name, "rate=1gbit", "network")


def test_an_empty_spec_is_the_unshaped_condition():
    for spec in ({}, None, "", "default", "none"):
        c = parse_condition("base", spec, "network.base")
        assert not c.shaped and not c.needs_netem and c.describe() == "unshaped" and c.name == "base"


def test_the_axis_keeps_order_and_defaults_to_one_unshaped_condition():
    assert list(parse_network_axis(None, "network")) == ["default"]
    assert list(parse_network_axis({}, "network")) == ["default"]
    axis = parse_network_axis({"default": {}, "d5_b2": {"delay": "5ms", "rate": "2gbit"}, "lossy": {"loss": "0.1%"}},
                              "conf.yaml: network")
    assert list(axis) == ["default", "d5_b2", "lossy"]
    assert [c.describe() for c in axis.values()] == ["unshaped", "rate=2gbit,delay=5ms", "loss=0.1%"]
    assert axis["d5_b2"].needs_netem and not parse_condition("r", "rate=1gbit", "x").needs_netem
    with pytest.raises(ConfigError, match=r"conf.yaml: network.lossy.loss='200%'"):
        parse_network_axis({"lossy": {"loss": "200%"}}, "conf.yaml: network")
    with pytest.raises(ConfigError, match="not a mapping"):
        parse_network_axis(["rate=1gbit"], "conf.yaml: network")


def test_the_transfer_floor_is_size_over_rate():
    # seed 000: "bandwidth 1 Gbit: 64 MB in 541 ms"; the bound is 64 MiB * 8 / 1e9 = 537 ms
    assert parse_condition("b1", "rate=1gbit", "x").min_transfer_s(64 * 2**20) == pytest.approx(0.5369, abs=1e-4)
    assert parse_condition("d", "delay=5ms", "x").min_transfer_s(100) is None
