from envmatrix.probes.transport_policy import transport_violation


def test_forbidden_net_transport_is_named_with_counts():
    facts = {"transports": {"NET/Socket": 10, "P2P/CUMEM": 4}}
    assert transport_violation(facts, ["NET"]) == "forbidden transport used: NET/Socket x10 (forbid_transport: NET)"
    assert transport_violation(facts, ["SHM"]) is None
    assert transport_violation(facts, ["P2P/CUMEM"]).startswith("forbidden transport used: P2P/CUMEM x4")
    assert transport_violation(facts, []) is None


def test_missing_log_is_a_violation_not_a_silent_pass():
    assert "NCCL_DEBUG=INFO" in transport_violation({}, ["NET"])
