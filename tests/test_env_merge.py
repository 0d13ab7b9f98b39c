from envmatrix.env import Atom, Setup, atoms_from_mapping, caller_pins, compose_rank_env, materialize, setup_diff
from envmatrix.errors import ConfigError

import pytest

SEED_003_PATHS = {"LD_LIBRARY_PATH": {"prepend": ["/soft/libraries/hwloc/lib/", "/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib"]}}


def test_path_prepends_are_separate_atoms_in_reading_order():
    atoms = atoms_from_mapping(SEED_003_PATHS, "s")
    assert [a.op for a in atoms] == ["prepend", "prepend"]
    env = materialize({"LD_LIBRARY_PATH": "/usr/lib"}, atoms)
    assert env["LD_LIBRARY_PATH"] == "/soft/libraries/hwloc/lib/:/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib:/usr/lib"


def test_prepend_without_inherited_value_has_no_trailing_colon():
    env = materialize({}, atoms_from_mapping(SEED_003_PATHS, "s"))
    assert not env["LD_LIBRARY_PATH"].endswith(":")


def test_scalars_bools_and_unset():
    atoms = atoms_from_mapping({"NCCL_CROSS_NIC": 1, "NCCL_P2P_DISABLE": True, "NCCL_DEBUG": None}, "s")
    env = materialize({"NCCL_DEBUG": "INFO"}, atoms)
    assert env == {"NCCL_CROSS_NIC": "1", "NCCL_P2P_DISABLE": "1"}


def test_list_value_is_rejected_with_fix():
    with pytest.raises(ConfigError, match="one value per variable"):
        atoms_from_mapping({"NCCL_ALGO": ["Ring", "Tree"]}, "conf.yaml: setups.x")


def test_pins_win_over_setup_and_rank_layers():
    env = compose_rank_env(
        inherited={"NCCL_NVLS_ENABLE": "0", "PATH": "/bin"},
        harness_defaults={"GLOO_SOCKET_IFNAME": "lo"},
        atoms=(Atom("NCCL_NVLS_ENABLE", value="1"), Atom("GLOO_SOCKET_IFNAME", value="eth9")),
        rank_vars={"RANK": "0"},
        pins={"NCCL_NVLS_ENABLE": "0"},
    )
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["GLOO_SOCKET_IFNAME"] == "eth9"  # setups beat harness defaults
    assert env["PATH"] == "/bin" and env["RANK"] == "0"


def test_caller_pins_only_those_set():
    assert caller_pins({"NCCL_NVLS_ENABLE": "0", "OTHER": "1"}) == {"NCCL_NVLS_ENABLE": "0"}
    assert caller_pins({}) == {}


def test_setup_diff_legend():
    a = Setup("0", (Atom("A", value="1"), Atom("B", value="2")))
    b = Setup("0-a", (Atom("B", value="2"),))
    assert setup_diff(a, b) == ["-A=1"]


def test_the_legend_lists_a_variables_prepends_in_the_order_a_shell_applies_them():
    # {prepend: [/plugin, /hwloc]} gives /plugin:/hwloc:$LD; listed in reading order, applied top to bottom, the
    # legend's lines built /hwloc first (a QA pass read it so)
    from envmatrix.reporting.matrix import legend_for

    paths = atoms_from_mapping({"LD_LIBRARY_PATH": {"prepend": ["/plugin", "/hwloc"]}, "NCCL_ALGO": "Ring"}, "s")
    first, other = Setup("a", tuple(paths)), Setup("b", (paths[-1],))
    expected = ["LD_LIBRARY_PATH=/hwloc:$LD_LIBRARY_PATH", "LD_LIBRARY_PATH=/plugin:$LD_LIBRARY_PATH", "NCCL_ALGO=Ring"]
    assert dict(legend_for([first, other]))["a"] == "; ".join(expected)
    assert setup_diff(other, first) == [f"+{line}" for line in expected[:2]]
    applied = "/usr/lib"
    for line in expected[:2]:  # the legend's lines, top to bottom, as a shell would apply them
        applied = line.split("=", 1)[1].replace("$LD_LIBRARY_PATH", applied)
    assert applied == "/plugin:/hwloc:/usr/lib"  # what the ranks get (reading order)


def test_digest_changes_with_env():
    assert Setup("x", (Atom("A", value="1"),)).digest() != Setup("x", (Atom("A", value="2"),)).digest()
