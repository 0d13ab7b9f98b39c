import pytest

from envmatrix.probes.transport_policy import transport_violation


def test_forbidden_net_transport_is_named_with_counts():
    facts = {"transports": {"NET/Socket": 10, "P2P/CUMEM": 4}}
    assert transport_violation(facts, ["NET"]) == "forbidden transport used: NET/Socket x10 (forbid_transport: NET)"
    assert transport_violation(facts, ["SHM"]) is None
    assert transport_violation(facts, ["P2P/CUMEM"]).startswith("forbidden transport used: P2P/CUMEM x4")
    assert transport_violation(facts, []) is None


def test_missing_log_is_a_violation_not_a_silent_pass():
    assert "NCCL_DEBUG=INFO" in transport_violation({}, ["NET"])


@pytest.mark.parametrize("raw, expect", [
    (5, r"^probe.forbid_transport: 5 is not a list; allowed: transports such as \[NET\]"),  # was: TypeError traceback
    (["NTE"], r"^probe.forbid_transport\[0\]: 'NTE' is not a transport \(did you mean NET\?\); allowed: P2P, SHM"),
    ([None], r"^probe.forbid_transport\[0\]: None is not a transport"),  # was: the policy 'None', never matched
])
def test_forbid_transport_values_are_checked(raw, expect):
    from envmatrix.errors import ConfigError
    from envmatrix.probes.transport_policy import forbidden_transports

    with pytest.raises(ConfigError, match=expect):
        forbidden_transports(raw, "probe.forbid_transport")


def test_forbid_transport_takes_one_name_or_a_list_of_families_and_kinds():
    from envmatrix.probes.transport_policy import forbidden_transports

    assert forbidden_transports("NET", "k") == ["NET"]  # was ['N', 'E', 'T']
    assert forbidden_transports(["SHM", "NET/Socket", "P2P/CUMEM"], "k") == ["SHM", "NET/Socket", "P2P/CUMEM"]
    assert forbidden_transports(None, "k") == []
