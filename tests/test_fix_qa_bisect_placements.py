"""Bisect on culprit placements from the QA placement hunt (/tmp/qa_bisect/FINDINGS.md): drafts that fail on main.

F1: a variable failing alone one way (after init) and with a partner another, earlier way (init) was named only as
an interacting pair, "answer proven complete: yes", exit 1, though the env without the partner still failed.
F5: the same with both lines of one stage (or a line quoting another variable's value): nothing named and no
passing env, though the probes had proved a one-atom culprit and a passing env; and a pair that could not be proven
minimal for its line was named at times. Every test here fails on 717fe8a (checked against its package)."""

import pytest

from envmatrix.bisect import PASS
from envmatrix.bisect.peel import find_all_culprits

INIT = ("exit_error", "bootstrap : cross nic with gdr unsupported")
LATE = ("exit_error", "proxy connection lost")
HANG = ("timeout", "killed at the probe timeout (phase unknown)")


def named(res):
    return {(s.signature, c) for s in res.sections for c in s.culprits}


def nested(alone: int, partner: int, pair_sig=INIT, alone_sig=LATE):
    def oracle(atoms):
        if alone in atoms and partner in atoms:
            return pair_sig
        return alone_sig if alone in atoms else PASS

    return oracle


@pytest.mark.parametrize("alone_sig", [LATE, HANG])
@pytest.mark.parametrize("n, alone, partner", [(6, 1, 3), (12, 0, 11), (17, 12, 2), (20, 19, 0)])
def test_an_atom_failing_alone_another_way_than_with_its_partner_is_named(n, alone, partner, alone_sig):
    res = find_all_culprits(n, nested(alone, partner, alone_sig=alone_sig), strict_after=True)
    assert (INIT, frozenset({alone, partner})) in named(res), res.sections
    # the env without the partner fails (LATE): the answer is complete only once that culprit is named too
    assert (alone_sig, frozenset({alone})) in named(res), (res.status, res.complete, res.sections)
    assert res.complete and res.final_env is not None and alone not in res.final_env, (res.status, res.final_env)


@pytest.mark.parametrize("n, alone, partner, other", [(22, 1, 16, 6), (9, 4, 0, 8), (15, 7, 3, 14)])
def test_a_nested_culprit_beside_an_independent_one_of_its_line_is_named(n, alone, partner, other):
    # the env without the partner fails the later line, but the independent culprit explains that probe: only the
    # env without the partner and the independent culprit shows the nested one
    def oracle(atoms):
        if alone in atoms and partner in atoms:
            return INIT
        return LATE if alone in atoms or other in atoms else PASS

    res = find_all_culprits(n, oracle, strict_after=True)
    assert named(res) == {(INIT, frozenset({alone, partner})), (LATE, frozenset({alone})), (LATE, frozenset({other}))}, \
        (res.status, res.complete, res.sections)
    assert res.complete and oracle(frozenset(res.final_env)) == PASS


@pytest.mark.parametrize("n, alone, partner", [(7, 1, 3), (12, 5, 6), (6, 1, 0)])
def test_nested_culprits_of_one_stage_name_what_was_proven_and_a_passing_env(n, alone, partner):
    pair, one = ("exit_error", "qa pair broke"), ("exit_error", "qa alone broke")
    res = find_all_culprits(n, nested(alone, partner, pair, one), strict_after=True)
    # docs/bisect.md: two failures of one stage "names both signatures' culprit sets and a passing env ... exits 3"
    assert (one, frozenset({alone})) in named(res), (res.status, res.sections, res.trail)
    # the pair cannot be proven minimal for its line ({alone} fails another way of its stage): never named
    assert named(res) == {(one, frozenset({alone}))}, res.sections
    assert res.final_env is not None and alone not in res.final_env, res.final_env
    assert not res.complete  # the pair's own line was never proven: exit 3


def test_a_culprit_whose_line_quotes_another_variables_value_is_named():
    # NCCL's lines quote values ("... on net socket"): without the harmless QA_NET the same culprit prints another line
    culprit, quoted = 2, 1

    def oracle(atoms):
        if culprit in atoms:
            return ("exit_error", "proxy lost on net " + ("socket" if quoted in atoms else "default"))
        return PASS

    res = find_all_culprits(5, oracle, strict_after=True)
    assert (("exit_error", "proxy lost on net default"), frozenset({culprit})) in named(res), (res.status, res.sections)
    assert all(c == frozenset({culprit}) for _, c in named(res)), res.sections  # every set named is proven
    assert res.final_env is not None and culprit not in res.final_env
    assert not res.complete


NESTED_PROBE = """
import os, sys
e = os.environ
if e.get("NCCL_CROSS_NIC") == "1" and e.get("NCCL_NET_GDR_LEVEL") == "PHB":
    print("NCCL WARN bootstrap : cross nic with gdr unsupported", flush=True); sys.exit(1)
if e.get("NCCL_NET_GDR_LEVEL") == "PHB":
    print("NCCL WARN proxy connection lost", flush=True); sys.exit(1)
"""


@pytest.mark.slow
def test_nested_culprits_with_real_ranks_are_not_claimed_complete(cli, tmp_path):
    from conftest import assert_no_processes, bisect_with_probe_script

    env = ["NCCL_DEBUG=WARN", "NCCL_NET_GDR_LEVEL=PHB", "NCCL_PROTO=Simple", "NCCL_CROSS_NIC=1", "NCCL_IB_DISABLE=1",
           "NCCL_ALGO=Ring"]
    done, report = bisect_with_probe_script(cli, tmp_path, NESTED_PROBE, env, "--no-repair")
    sections = [(s["failure"]["line"], s["culprits"]) for s in report["signatures"]]
    # on main: one section (the pair), "answer proven complete: yes", exit 1, the env without NCCL_CROSS_NIC failing
    assert ("proxy connection lost", [["NCCL_NET_GDR_LEVEL=PHB"]]) in sections, (done.returncode, sections)
    assert done.returncode == 1 and report["complete"], (done.returncode, report["status"])  # both proven
    assert report["recommended_proven"] and "NCCL_NET_GDR_LEVEL=PHB" not in report["recommended_env"]
    assert_no_processes(cli.marker)


ONE_STAGE_PROBE = """
import os, sys
e = os.environ
if e.get("QA_A") == "1" and e.get("QA_B") == "1":
    print("qa pair broke", flush=True); sys.exit(1)
if e.get("QA_A") == "1":
    print("qa alone broke", flush=True); sys.exit(1)
"""


@pytest.mark.slow
def test_nested_culprits_of_one_stage_with_real_ranks_name_the_proven_one(cli, tmp_path):
    from conftest import assert_no_processes, bisect_with_probe_script

    env = ["QA_H1=1", "QA_A=1", "QA_H2=1", "QA_B=1", "QA_H3=1"]
    done, report = bisect_with_probe_script(cli, tmp_path, ONE_STAGE_PROBE, env, "--no-repair")
    sections = [(s["failure"]["line"], s["culprits"]) for s in report["signatures"]]
    # on main: exit 3, "none found", no recommended env, though {QA_A} failed alone and the env without it passed
    assert ("qa alone broke", [["QA_A=1"]]) in sections and ("qa pair broke", []) in sections, sections
    assert done.returncode == 3 and not report["complete"]
    assert report["recommended_proven"] and report["recommended_env"] == ["QA_H1=1", "QA_H2=1", "QA_B=1", "QA_H3=1"]
    md = next((tmp_path / "o").glob("bisect_*.md")).read_text()
    assert "which may hide it: inconclusive for this failure" in md
    assert_no_processes(cli.marker)
