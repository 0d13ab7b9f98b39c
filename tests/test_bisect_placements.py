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
