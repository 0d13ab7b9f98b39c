"""Bisect of an env holding a variable it needs: without it every env fails another, earlier way (a socket
interface, a plugin path), which hides the failure being bisected. Before, every probe missing that variable
said nothing about the culprit and the search spent the whole probe cap (exit 3, 24-28 probes, no culprit)."""

import pytest

from conftest import assert_no_processes, bisect_with_probe_script
from envmatrix.bisect import PASS
from envmatrix.bisect.peel import find_all_culprits

BAD = ("exit_error", "wrong result in allreduce")
MISSING_IF = ("init_error", "bootstrap : no socket interface found")  # earlier than BAD: it hides it
SAME_STAGE = ("exit_error", "required variable missing")  # one stage with BAD: cannot be ordered against it


def required_oracle(required: set, bad: int, missing=MISSING_IF):
    def oracle(atoms):
        if not required <= atoms:
            return missing
        return BAD if bad in atoms else PASS

    return oracle


@pytest.mark.parametrize("n", [9, 12, 15])
@pytest.mark.parametrize("required,bad", [(0, -1), (-1, 0), ("mid", "mid+1"), (1, 2)])
@pytest.mark.parametrize("missing", [MISSING_IF, SAME_STAGE])
def test_a_required_variable_is_kept_and_the_culprit_named(n, required, bad, missing):
    pos = {"mid": n // 2, "mid+1": n // 2 + 1}
    req, culprit = (pos.get(x, x) % n for x in (required, bad))
    res = find_all_culprits(n, required_oracle({req}, culprit, missing), strict_after=True)
    assert res.status == "ok" and res.complete, (res.status, res.sections, res.probes)
    assert res.culprits == [frozenset({culprit})]
    assert res.sections[0].required == [req] and res.sections[0].required_sig == missing
    assert req in res.final_env and culprit not in res.final_env
    assert res.probes <= 18  # 24 (n = 9) to 28 (n = 15) before, the whole default cap


def test_two_required_variables_and_an_interacting_pair():
    res = find_all_culprits(12, lambda a: MISSING_IF if not {3, 8} <= a else BAD if {5, 11} <= a else PASS, strict_after=True)
    assert res.status == "ok" and res.complete and res.culprits == [frozenset({5, 11})], (res.status, res.sections)
    assert res.sections[0].required == [3, 8]


@pytest.mark.parametrize("bad", [0, 6, 11])
def test_a_culprit_checked_before_the_required_one_is_still_found(bad):
    # the program meets the culprit first: the env without the required variable but with the culprit fails the
    # culprit's way, so nothing is hidden; the search must not pin the culprit as "required"
    def oracle(atoms):
        if bad in atoms:
            return BAD
        return SAME_STAGE if 4 not in atoms else PASS

    res = find_all_culprits(12, oracle, strict_after=True)
    assert res.status == "ok" and res.culprits == [frozenset({bad})], (res.status, res.sections)
    assert bad not in res.sections[0].required


def test_a_failure_in_the_base_is_no_required_variable():
    # every env fails the same earlier way whatever it holds, and the env's own failure is another: inconclusive
    res = find_all_culprits(10, lambda a: BAD if 7 in a and len(a) == 10 else MISSING_IF, strict_after=True)
    assert res.status != "ok" and not res.complete and not any(s.required for s in res.sections)


# rank 0 and 1 both run it: without the interface variable NCCL's bootstrap fails, with it the GDR level breaks
REQUIRED_PROBE = """
import os, sys
if os.environ.get("NCCL_SOCKET_IFNAME") != "hsn0":
    print("NCCL WARN Bootstrap : no socket interface found", flush=True); sys.exit(1)
if os.environ.get("NCCL_NET_GDR_LEVEL") == "PHB":
    print("NCCL WARN wrong result in allreduce", flush=True); sys.exit(1)
"""


@pytest.mark.slow
def test_a_required_variable_with_real_ranks(cli, tmp_path):
    env = ["NCCL_DEBUG=WARN", "NCCL_NET_GDR_LEVEL=PHB", "NCCL_CROSS_NIC=1", "NCCL_COLLNET_ENABLE=1", "NCCL_NET_PLUGIN=ofi",
           "FI_CXI_DISABLE_HOST_REGISTER=1", "FI_MR_CACHE_MONITOR=userfaultfd", "FI_CXI_DEFAULT_CQ_SIZE=131072",
           "FI_PROVIDER=cxi", "NCCL_IB_DISABLE=1", "NCCL_SOCKET_IFNAME=hsn0"]
    done, report = bisect_with_probe_script(cli, tmp_path, REQUIRED_PROBE, env, "--no-repair")
    assert done.returncode == 1, done.stdout + done.stderr
    assert report["culprits"] == [["NCCL_NET_GDR_LEVEL=PHB"]] and report["complete"] and report["status"] == "ok"
    (section,) = report["signatures"]
    assert section["required"] == ["NCCL_SOCKET_IFNAME=hsn0"]
    assert "no socket interface" in section["required_failure"]["line"]
    assert "NCCL_SOCKET_IFNAME=hsn0" in report["recommended_env"] and report["recommended_proven"]
    assert report["probes_launched"] <= 16  # 28 before, the cap, answering nothing
    md = (tmp_path / "o" / "bisect_env_1x2.md").read_text()
    assert "searched with `NCCL_SOCKET_IFNAME=hsn0` kept: the env without it fails another way" in md
    assert_no_processes(cli.marker)
