"""Bisect on culprit placements and failure shapes found by running `envmatrix bisect` with real gloo ranks
(the placement audit): each test here failed before its fix."""

import random

import pytest

from envmatrix.bisect import PASS
from envmatrix.bisect.peel import find_all_culprits, read_for

LINE = "nccl warn injected failure proxy error"


def test_the_same_line_ending_in_an_abort_is_the_same_failure():
    # Seen with real gloo ranks: both ranks print the error and exit 1, and one of them sometimes aborts at exit
    # ("terminate called without an active exception", SIGABRT): the probe is a crash, same root-cause line.
    # A crash is a later stage than exit_error, so it was read as "the culprit is absent".
    assert read_for(("crash", LINE), ("exit_error", LINE)) == "fail"
    assert read_for(("exit_error", LINE), ("crash", LINE)) == "fail"
    assert read_for(("crash", ""), ("exit_error", "")) != "fail"  # no line: nothing says it is the same
    assert read_for(("crash", "other"), ("exit_error", LINE)) == PASS  # a later failure still clears


@pytest.mark.parametrize("culprit", [0, 5, 11])
@pytest.mark.parametrize("seed", range(3))
def test_a_culprit_whose_failure_sometimes_ends_in_an_abort_is_found(culprit, seed):
    rng = random.Random(seed)

    def oracle(atoms):
        return (rng.choice(["exit_error", "crash"]), LINE) if culprit in atoms else PASS

    res = find_all_culprits(12, oracle, strict_after=True)
    assert res.status == "ok" and res.complete, (res.status, res.sections)
    assert res.culprits == [frozenset({culprit})]
    assert set(res.final_env) == set(range(12)) - {culprit}


# Every rank prints the error and exits 1 when ENVMATRIX_C is set; rank 1 aborts on the way out from its second
# run on (as gloo's threads did on this host at times): the env's own run is exit_error, later ones crash, one line.
ABORTS_AFTER_THE_FIRST_RUN = """
import os, sys
if "ENVMATRIX_C" not in os.environ:
    sys.exit(0)
print("NCCL WARN proxy connection lost", flush=True)
if os.environ["RANK"] == "1":
    path = os.path.join(os.environ["COUNTERS"], "rank1")
    runs = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(runs + 1))
    if runs:
        os.abort()
sys.exit(1)
"""


@pytest.mark.slow
def test_a_culprit_whose_ranks_sometimes_abort_with_real_processes(cli, tmp_path):
    from conftest import assert_no_processes, bisect_with_probe_script

    env = [f"ENVMATRIX_H{i}={i}" for i in range(8)] + ["ENVMATRIX_C=1"]
    done, report = bisect_with_probe_script(cli, tmp_path, ABORTS_AFTER_THE_FIRST_RUN, env, "--no-repair")
    assert done.returncode == 1, done.stdout + done.stderr
    assert report["culprits"] == [["ENVMATRIX_C=1"]] and report["complete"]
    outcomes = {t["outcome"] for t in report["trail"]}
    assert outcomes == {"fail", "pass"}, report["trail"]  # the aborted runs are shown as the env's failure too
    assert_no_processes(cli.marker)
