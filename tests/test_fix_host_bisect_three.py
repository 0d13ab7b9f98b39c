"""``bisect --hosts`` on 3 hosts judges slowness relatively (it skipped the pair rounds below 4 hosts, so a slow host
among 3 was never named). Every round of 3 hosts is one pair, judged against the other pairs' median (194e543):
all three pairs run, so a slow host's two pairs meet the fine third one."""

from __future__ import annotations

import pytest

from cluster_fixture import ns_cluster  # noqa: F401  (fixture)
from conftest import assert_no_processes
from envmatrix.bisect.hosts import OK, SLOW, localise
from test_host_bisect_slow import fabric, hosts, namespace_hosts_conf, run_host_bisect


@pytest.mark.parametrize("bad", ["emh0", "emh1", "emh2"])
def test_a_slow_host_among_three_is_named_wherever_it_sits(bad):
    # emh2 plays the first two rounds: its two slow pairs, each the other's only reference, looked fine until the
    # third pair ran
    for seed in range(5):
        result = localise(hosts(3), fabric(slow={bad}, seed=seed), relative=True)
        assert result.culprits == [(bad,)] and result.exclude == [bad] and result.complete, (seed, result.evidence)
        assert result.verdicts[bad].status == SLOW and "sure: all 2 of its pairs slow" in result.verdicts[bad].why
        assert all(v.status == OK for h, v in result.verdicts.items() if h != bad)


def test_three_healthy_hosts_name_no_one():
    for seed in range(20):
        result = localise(hosts(3), fabric(seed=seed), relative=True)
        assert result.culprits == [] and result.complete and not any(p.slow for p in result.pairs.pairs), result.evidence


def test_a_pair_slowed_once_among_three_is_measured_again_and_cleared():
    result = localise(hosts(3), fabric(noisy_once=[("emh0", "emh2")]), relative=True)
    assert result.culprits == [] and result.complete, result.evidence
    assert [e.verdict for e in result.evidence if set(e.hosts) == {"emh0", "emh2"}] == [OK, OK]


def test_a_slow_link_among_three_is_a_link():
    result = localise(hosts(3), fabric(links=[("emh0", "emh2")]), relative=True)
    assert result.culprits == [("emh0", "emh2")] and len(result.exclude) == 1 and result.complete, result.evidence


def test_a_host_slowed_less_than_the_three_host_limit_is_not_named():
    """The documented limit: a one-pair round's reference is the mean of a fine and a slow pair, so at the default
    tolerance (a quarter) a slow host is named below 1/7 of the fine pair, not at 1/5."""
    assert localise(hosts(3), fabric(slow={"emh1"}, capped=0.5 / 10, spread=1.0), relative=True).culprits == [("emh1",)]
    assert localise(hosts(3), fabric(slow={"emh1"}, capped=0.5 / 5, spread=1.0), relative=True).culprits == []


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_three_namespace_hosts_healthy_name_no_one_and_a_rate_limited_one_is_excluded(ns_cluster, cli, tmp_path):  # noqa: F811
    cluster = ns_cluster(3)
    conf, hostfile = namespace_hosts_conf(cluster, tmp_path)  # as the five-host run of test_host_bisect_slow
    healthy, report = run_host_bisect(cli, conf, hostfile, tmp_path / "healthy")
    assert healthy.returncode == 0 and report["culprits"] == [], healthy.stdout[-3000:] + healthy.stderr[-2000:]
    # judged: every pair measured (a pair read slow once under load is measured again, a fourth reading)
    assert report["pairs"] is not None and {frozenset(p["hosts"]) for p in report["pairs"]["pairs"]} == {
        frozenset(("node0", "node1")), frozenset(("node0", "node2")), frozenset(("node1", "node2"))}
    assert "slow link" not in report["pairs"]["summary"] and "exclude:" not in healthy.stdout
    cluster.rate_limit("node2", "20mbit")  # node2 plays the first two rounds (the case that needs all three pairs)
    proc, report = run_host_bisect(cli, conf, hostfile, tmp_path / "slow")
    evidence = [(e["round"], e["hosts"], e["verdict"], e.get("gbps")) for e in report.get("evidence", [])]
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]  # was 0: no pair round below 4 hosts
    assert report["culprits"] == [["node2"]] and report["exclude"] == ["node2"] and report["complete"], evidence
    assert "exclude: node2\n" in proc.stdout and "sure" in report["verdicts"]["node2"]["why"]
    assert all(v["status"] == "ok" for h, v in report["verdicts"].items() if h != "node2")
    assert_no_processes(cli.marker)
