"""Bisect's answers at the edges (issue 39 points 1-3): a capped search never names an unproven culprit, repairs
are judged with the other culprits removed, and --failing with nothing failing is "nothing to bisect" (exit 0)."""

import json
import sys

import pytest

from envmatrix.bisect.peel import find_all_culprits

SIG = ("collective_error", "boom")


def _oracle(culprits):
    return lambda atoms: SIG if any(c <= atoms for c in culprits) else "pass"


@pytest.mark.parametrize("n,culprits", [(6, [{1}, {4}]), (10, [{1}, {4}]), (24, [{23}, {22}]), (24, [{2, 3}])])
def test_a_capped_search_names_no_unproven_culprit_and_keeps_every_real_one_suspect(n, culprits):
    peel = find_all_culprits(n, _oracle([frozenset(c) for c in culprits]), max_probes=4, strict_after=True)
    assert peel.status == "budget"
    assert peel.culprits == []  # four probes prove no culprit set
    assert set().union(*culprits) <= set(peel.suspects)  # the real culprits are not cleared


# Each rank fails when ENVMATRIX_A or ENVMATRIX_B is set: two independent culprits among five variables.
TWO_CULPRITS = "import os, sys; sys.exit(1 if {'ENVMATRIX_A', 'ENVMATRIX_B'} & set(os.environ) else 0)"
ENV = "".join(f"export ENVMATRIX_{v}=1\n" for v in "CADEB")


def _bisect(cli, tmp_path, *flags):
    env_file = tmp_path / "env0.sh"
    env_file.write_text(ENV)
    return cli.run("bisect", "backend=gloo", "--grid", "1x1", "--env-file", str(env_file), "--allow-unknown-vars",
                   "--allow-ignored-vars", "--probe-cmd", f"{sys.executable} -c \"{TWO_CULPRITS}\"",
                   "--out", str(tmp_path / "run"), "--json", str(tmp_path / "r.json"), *flags)


@pytest.mark.slow
def test_capped_bisect_with_real_probes_claims_nothing_it_did_not_prove(cli, tmp_path):
    done = _bisect(cli, tmp_path, "--max-probes", "4", "--no-repair")
    assert done.returncode == 3, done.stdout + done.stderr
    (report,) = json.loads((tmp_path / "r.json").read_text())
    assert report["culprits"] == [] and report["status"] == "budget"
    assert {"ENVMATRIX_A=1", "ENVMATRIX_B=1"} <= set(report["suspects"])
    md = (tmp_path / "run" / "bisect_env0_1x1.md").read_text()
    assert "(fails alone)" not in md and "Not cleared (most suspect first)" in md


@pytest.mark.slow
def test_each_repair_is_judged_with_the_other_culprits_removed(cli, tmp_path):
    done = _bisect(cli, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    (report,) = json.loads((tmp_path / "r.json").read_text())
    assert sorted(report["culprits"]) == [["ENVMATRIX_A=1"], ["ENVMATRIX_B=1"]]
    # unsetting either culprit repairs it once the other culprit is gone too
    assert {(r["var"], r["outcome"]) for r in report["repairs"]} == {("ENVMATRIX_A", "pass"), ("ENVMATRIX_B", "pass")}
    assert report["recommended_proven"] and not any("ENVMATRIX_A" in a or "ENVMATRIX_B" in a for a in report["recommended_env"])


@pytest.mark.slow
def test_failing_grid_with_nothing_failing_is_nothing_to_bisect(cli, tmp_path):
    from conftest import write_conf

    conf = write_conf(tmp_path / "s.yaml", """
backend: gloo
grids: [1x1]
setups:
  ok: {}
  also_ok: {ENVMATRIX_X: '1'}
probe: {timeout_s: 30, collectives: [allreduce]}
""")
    out = tmp_path / "o"
    assert cli.run("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars").returncode == 0
    done = cli.run("bisect", f"conf={conf}", "--failing", "1x1", "--out", str(out), "--allow-unknown-vars")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"nothing to bisect: no failing runs for 1x1 in {out}/results.sqlite" in done.stdout
    # a grid the sweep never ran is no "all passed": bad input, and the run directory stays as it was
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    done = cli.run("bisect", f"conf={conf}", "--failing", "2x2", "--out", str(out), "--allow-unknown-vars")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--failing 2x2: the last sweep in" in done.stderr and "never ran 2x2; allowed: a grid it ran (1x1)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_stored_failing_env_names_the_original_failure_and_leads_the_trail():
    from envmatrix.bisect.driver import ProbeContext, bisect_env
    from envmatrix.env.atoms import SET, Atom
    from envmatrix.planning.grid import parse_grid
    from envmatrix.results import ProbeResult

    a, b = Atom("ENVMATRIX_A", SET, "1"), Atom("ENVMATRIX_B", SET, "1")

    def stored(*atoms):
        failing = a in atoms
        return ProbeResult("k", {"atoms": [x.to_json() for x in atoms]}, "1x1", {}, "gloo", "local",
                           "exit_error" if failing else "pass", {"line": "exit code 1", "rank": 0} if failing else {})

    # every probe the answer needs is in the store: nothing is launched (a session would be needed to launch)
    report = bisect_env(ProbeContext(None, parse_grid("1x1", "--grid")), "env0", [a, b], repair=False,
                        stored=[stored(a, b), stored(), stored(a), stored(b)])
    assert report.probes_launched == 0 and report.culprits == [[a]]
    assert report.original == {"outcome": "exit_error", "line": "exit code 1", "rank": 0}
    assert report.trail[0] == ([0, 1], "fail") and len(report.trail) == 4
