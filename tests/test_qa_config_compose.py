"""QA of composition with valid but unusual overrides: a key added inside a strategies entry, an entry removed or
indexed past the end (one line each, the override as written), and the documented precedence of defaults lists."""

from __future__ import annotations

import pytest

from envmatrix.config import compose_config
from envmatrix.config.resolve import resolve
from envmatrix.errors import ConfigError


def setups_of(*overrides: str) -> dict[str, dict[str, str]]:
    cfg, conf_file = compose_config(["backend=gloo", "grids=[1x1]", *overrides])
    return {s.name: s.assignments() for s in resolve(cfg, conf_file, gpus=0, pins={}).setups}


def error_of(*overrides: str) -> str:
    with pytest.raises(ConfigError) as err:
        setups_of(*overrides)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_dotted_override_adds_a_key_inside_a_strategy_entry():
    """As search.trials=4 adds a key to search; it was 'unknown key labels; allowed: name, backend, ...'."""
    labels = "strategies.0.labels={NCCL_NET_GDR_LEVEL: g, NCCL_CROSS_NIC: x, NCCL_COLLNET_ENABLE: c}"
    assert list(setups_of("conf=aws_ofi_leave_out", labels)) == ["0", "0-g", "0-x", "0-c", "0-gx", "0-gc", "0-xc"]
    assert list(setups_of("conf=aws_ofi_leave_out", "strategies.0.sizes=[2]")) == ["0", "0-ab", "0-ac", "0-bc"]
    # the strategy's own check still names a mistyped key
    assert "unknown key 'sizez' for kind leave_out (did you mean sizes?)" in error_of("conf=aws_ofi_leave_out",
                                                                                     "strategies.0.sizez=[2]")


def test_a_list_entry_removed_or_past_the_end_is_one_line_naming_the_override_as_written():
    assert error_of("conf=aws_ofi_leave_out", "~strategies.0") == (
        "override ~strategies.0: removes an entry of the list strategies, which an override cannot; allowed: "
        "strategies=[...] (the list without it), or ~strategies.N.KEY (a key of entry N)")  # was a TypeError traceback
    assert error_of("conf=default", "~hosts.0").startswith("override ~hosts.0: removes an entry of the list hosts")
    assert error_of("conf=aws_ofi_leave_out", "strategies.3.n=2") == (
        "override strategies.3.n=2: strategies[3] is past the end of the list strategies; allowed: an index of an "
        "entry the config has (from 0), or strategies=[...] for the whole list")  # was 'a value of the wrong kind'
    assert error_of("conf=aws_ofi_leave_out", "setups.0=[1]").startswith("override setups.0=[1]: ")  # not ++setups
    assert list(setups_of("conf=aws_ofi_leave_out", "~strategies.0.sizes"))[-1] == "0-bc"  # a key inside: fine


def test_overrides_apply_in_order_and_defaults_follow_the_documented_precedence(tmp_path):
    same_key = ["setups={x: {NCCL_ALGO: Ring}}", "setups.x.NCCL_ALGO=Tree", "setups.x.NCCL_ALGO=Ring"]
    assert setups_of("conf=default", *same_key)["x"] == {"NCCL_ALGO": "Ring"}  # the last one wins
    child = tmp_path / "child.yaml"
    child.write_text("defaults: [default, _self_]\nsetups:\n  no_shm: {NCCL_SHM_DISABLE: 0}\n  mine: {NCCL_ALGO: Tree}\n")
    got = setups_of(f"conf={child}", "+setups.extra={NCCL_PROTO: LL}", "~setups.no_p2p")
    assert list(got) == ["baseline", "no_shm", "ring_simple", "mine", "extra"]
    assert got["no_shm"] == {"NCCL_SHM_DISABLE": "0"}  # _self_ last: the file beats its base
    base_wins = tmp_path / "base_wins.yaml"
    base_wins.write_text("defaults: [_self_, default]\nsetups:\n  no_shm: {NCCL_SHM_DISABLE: 0}\n")
    assert setups_of(f"conf={base_wins}")["no_shm"] == {"NCCL_SHM_DISABLE": "1"}
    assert setups_of(f"conf={base_wins}", "setups.no_shm.NCCL_SHM_DISABLE=0")["no_shm"] == {"NCCL_SHM_DISABLE": "0"}
