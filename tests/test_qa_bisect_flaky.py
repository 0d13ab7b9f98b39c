"""Bisect with --repeats of an env that fails only some of its runs: it is flaky, not 'nothing to bisect'.
Before, an env whose runs passed often enough (a culprit failing one run in two settles "passes" one time in
three at --repeats 2 or 3) ended "env passes", exit 0, which CI reads as passed, its failing runs unmentioned."""

import json
import random
import sys

import pytest

from conftest import assert_no_processes, bisect_with_probe_script
from envmatrix.bisect import PASS
from envmatrix.bisect.peel import find_all_culprits

LINE = ("exit_error", "transient failure in proxy")


@pytest.mark.parametrize("repeats", [2, 3])
def test_an_env_that_failed_some_runs_but_settled_passing_is_flaky(repeats):
    runs = iter([PASS, LINE] + [PASS] * 20)
    res = find_all_culprits(9, lambda atoms: next(runs) if len(atoms) == 9 else PASS, repeats=repeats)
    assert res.status == "env flaky" and res.final_env is None and not res.culprits and not res.complete


def test_an_env_that_failed_in_the_sweep_and_passed_every_bisect_run_is_flaky():
    # bisect --failing GRID --repeats K: the sweep's failing run of the env is one of its runs
    res = find_all_culprits(9, lambda atoms: PASS, repeats=2, known={frozenset(range(9)): LINE})
    assert res.status == "env flaky" and res.final_env is None


def test_an_env_whose_runs_all_passed_still_passes():
    res = find_all_culprits(9, lambda atoms: PASS, repeats=3)
    assert res.status == "env passes" and res.final_env == list(range(9))


def test_a_culprit_failing_half_its_runs_is_reported_passing_only_when_no_run_of_the_env_failed():
    # the env holds a culprit that fails one run in two; a run of it that failed rules out "env passes"
    statuses = []
    for seed in range(24):
        rng = random.Random(seed)
        res = find_all_culprits(9, lambda atoms: LINE if 4 in atoms and rng.random() < 0.5 else PASS, repeats=2)
        env_runs = [sig for atoms, sig in res.trail if len(atoms) == 9]
        assert (res.status == "env passes") == all(sig == PASS for sig in env_runs), (seed, res.status, env_runs)
        statuses.append(res.status)
    assert "env flaky" in statuses  # 5 of these 24 seeds settled the env as passing after a failed run


# rank 0 decides: the env with all three variables fails on its second run only (a counter file per env)
SECOND_RUN_FAILS = """
import hashlib, os, sys
if os.environ.get("RANK", "0") != "0":
    sys.exit(0)
names = sorted(k for k in os.environ if k.startswith("ENVMATRIX_H"))
path = os.path.join(os.environ["COUNTERS"], hashlib.sha1(",".join(names).encode()).hexdigest())
runs = int(open(path).read()) if os.path.exists(path) else 0
open(path, "w").write(str(runs + 1))
if len(names) == 3 and runs == 1:
    print("NCCL WARN transient failure in proxy", flush=True)
    sys.exit(1)
"""


@pytest.mark.slow
def test_a_flaky_env_with_real_ranks_is_inconclusive(cli, tmp_path):
    done, report = bisect_with_probe_script(cli, tmp_path, SECOND_RUN_FAILS, ["ENVMATRIX_H1=1", "ENVMATRIX_H2=2", "ENVMATRIX_H3=3"],
                                            "--repeats", "2")
    assert done.returncode == 3, done.stdout + done.stderr
    assert report["status"] == "env flaky" and report["culprits"] == [] and not report["recommended_proven"]
    assert report["original_failure"]["line"] == "transient failure in proxy"
    md = (tmp_path / "o" / "bisect_env_1x2.md").read_text()
    assert "The env failed in 1 of its 6 runs and passed in the others: flaky" in md
    assert_no_processes(cli.marker)


# rank 0 decides: the env holding QA_X fails on its first run only (the sweep's), then passes
FIRST_RUN_FAILS = """
import os, sys
if os.environ.get("RANK", "0") != "0" or os.environ.get("QA_X") != "1":
    sys.exit(0)
path = os.path.join(os.environ["COUNTERS"], "runs")
runs = int(open(path).read()) if os.path.exists(path) else 0
open(path, "w").write(str(runs + 1))
if runs == 0:
    print("NCCL WARN transient failure", flush=True)
    sys.exit(1)
"""


@pytest.mark.slow
def test_the_sweeps_failing_run_is_one_vote_of_a_flaky_env(cli, tmp_path):
    (tmp_path / "probe.py").write_text(FIRST_RUN_FAILS)
    (tmp_path / "counters").mkdir()
    cli.env["COUNTERS"] = str(tmp_path / "counters")
    conf = tmp_path / "c.yaml"
    conf.write_text(f"name: ff\nbackend: gloo\ngrids: [1x2]\nsetups:\n  bad: {{QA_X: 1, QA_Y: 2, QA_Z: 3}}\n"
                    f"probe: {{name: command, command: [{sys.executable}, {tmp_path / 'probe.py'}], timeout_s: 20}}\n")
    out = tmp_path / "o"
    assert cli.run("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars").returncode == 1
    done = cli.run("bisect", f"conf={conf}", "--failing", "1x2", "--repeats", "2", "--out", str(out), "--allow-unknown-vars",
                   "--json", str(tmp_path / "r.json"))
    assert done.returncode == 3, done.stdout + done.stderr
    (report,) = json.loads((tmp_path / "r.json").read_text())
    # the sweep's failing run plus 4 bisect runs that passed; before, the stored run was handed back as the first
    # "fresh" run too and counted twice ("failed in 2 of its 7 runs")
    assert report["status"] == "env flaky" and report["probes_launched"] == 4 and report["free_probes"] == 1
    assert "The env failed in 1 of its 5 runs" in (out / "bisect_bad_1x2.md").read_text()
    assert_no_processes(cli.marker)
