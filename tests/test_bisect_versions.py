"""bisect_versions: git-bisect semantics over ordered NCCL builds / plugin paths."""

from __future__ import annotations

import math

import pytest

from envmatrix.bisect.versions import (
    VersionBisectResult,
    bisect_versions,
    max_tests,
    outcome_from_exit_code,
    parse_versions_file,
    version_atoms,
)
from envmatrix.env.atoms import Atom
from envmatrix.errors import ConfigError


def vers(n: int) -> list[str]:
    return [f"/soft/nccl/2.{i}/lib" for i in range(n)]


class Oracle:
    """First bad at index ``culprit``; ``skips`` answer skip; counts calls per version."""

    def __init__(self, versions, culprit, skips=()):
        self.index = {v: i for i, v in enumerate(versions)}
        self.culprit = culprit
        self.skips = {versions[i] for i in skips}
        self.calls: list[str] = []

    def __call__(self, v: str) -> str:
        self.calls.append(v)
        if v in self.skips:
            return "skip"
        return "bad" if self.index[v] >= self.culprit else "good"


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 8, 9, 16, 17, 33, 100])
def test_first_bad_found_for_every_position_within_log_budget(n):
    versions = vers(n)
    budget = math.ceil(math.log2(n)) + 2
    assert max_tests(n) <= budget
    for culprit in range(1, n):
        oracle = Oracle(versions, culprit)
        res = bisect_versions(versions, oracle)
        assert res.first_bad == versions[culprit]
        assert res.last_good == versions[culprit - 1]
        assert res.candidates == [versions[culprit]]
        assert res.ambiguous is False
        assert res.message == f"first bad version: {versions[culprit]} (last good: {versions[culprit - 1]})"
        assert len(oracle.calls) <= budget, (n, culprit, oracle.calls)
        assert len(set(oracle.calls)) == len(oracle.calls), "a version was tested twice"
        assert [v for v, _ in res.tested] == oracle.calls


def test_exact_probe_order_ends_first_then_middle():
    versions = list("abcdefghi")  # 9 versions, culprit g (index 6)
    oracle = Oracle(versions, 6)
    res = bisect_versions(versions, oracle)
    assert res.tested == [("a", "good"), ("i", "bad"), ("e", "good"), ("g", "bad"), ("f", "good")]
    assert res.first_bad == "g"


def test_skip_tries_nearest_neighbour_alternating_sides():
    versions = list("abcdefghi")
    oracle = Oracle(versions, 6, skips=[4, 5])  # e and f skipped
    res = bisect_versions(versions, oracle)
    # mid e skipped -> f (after) skipped -> d (before) good -> mid of (d,i) is f (cached skip) -> g bad
    assert res.tested == [
        ("a", "good"),
        ("i", "bad"),
        ("e", "skip"),
        ("f", "skip"),
        ("d", "good"),
        ("g", "bad"),
    ]
    assert res.first_bad is None
    assert res.last_good == "d"
    assert res.candidates == ["e", "f", "g"]
    assert res.ambiguous is True
    assert res.skipped == ["e", "f"]
    assert res.message == "first bad is one of: e, f, g (skipped: e, f; last good: d)"


def test_skip_far_from_culprit_is_harmless():
    versions = vers(16)
    oracle = Oracle(versions, 12, skips=[7])
    res = bisect_versions(versions, oracle)
    assert res.first_bad == versions[12]
    assert res.ambiguous is False
    assert res.candidates == [versions[12]]
    assert len(set(oracle.calls)) == len(oracle.calls)
    assert len(oracle.calls) <= max_tests(16) + 1


def test_skip_just_before_culprit_is_ambiguous():
    versions = list("abcdef")
    oracle = Oracle(versions, 3, skips=[2])  # c skipped, d is first bad
    res = bisect_versions(versions, oracle)
    assert res.first_bad is None
    assert res.last_good == "b"
    assert res.candidates == ["c", "d"]
    assert res.ambiguous
    assert res.message == "first bad is one of: c, d (skipped: c; last good: b)"
    assert sorted(oracle.calls) == sorted(set(oracle.calls))


@pytest.mark.parametrize("n", [3, 5, 8, 13])
def test_every_interior_version_skipped(n):
    versions = vers(n)
    oracle = Oracle(versions, n - 1, skips=range(1, n - 1))
    res = bisect_versions(versions, oracle)
    assert res.candidates == versions[1:]
    assert res.ambiguous and res.first_bad is None and res.last_good == versions[0]
    assert len(oracle.calls) == n  # each tested exactly once, never twice
    assert len(set(oracle.calls)) == n


def test_all_good_means_no_regression():
    versions = vers(10)
    res = bisect_versions(versions, lambda v: "good")
    assert res == VersionBisectResult(
        first_bad=None,
        last_good=versions[-1],
        candidates=[],
        ambiguous=False,
        tested=[(versions[0], "good"), (versions[-1], "good")],
        message=f"last version is good: no regression ({versions[-1]})",
    )


def test_first_version_already_bad():
    versions = vers(10)
    calls = []
    res = bisect_versions(versions, lambda v: calls.append(v) or "bad")
    assert calls == [versions[0]]
    assert res.first_bad is None and res.candidates == [] and not res.ambiguous
    assert res.message == f"versions[0] is already bad: nothing to bisect ({versions[0]})"


def test_untestable_ends():
    versions = list("abc")
    res = bisect_versions(versions, lambda v: "skip")
    assert res.tested == [("a", "skip")]
    assert res.message == "versions[0] could not be tested (skip): no known good version (a)"
    res = bisect_versions(versions, lambda v: "good" if v == "a" else "skip")
    assert res.tested == [("a", "good"), ("c", "skip")]
    assert res.first_bad is None
    assert res.message == "last version could not be tested (skip): no known bad version (c)"


def test_two_versions():
    res = bisect_versions(["old", "new"], lambda v: "good" if v == "old" else "bad")
    assert (res.first_bad, res.last_good, res.tested) == ("new", "old", [("old", "good"), ("new", "bad")])


def test_bad_inputs():
    with pytest.raises(ValueError, match="at least 2"):
        bisect_versions(["a"], lambda v: "good")
    with pytest.raises(ValueError, match="listed twice"):
        bisect_versions(["a", "b", "a"], lambda v: "good")
    with pytest.raises(ValueError, match="returned 'pass'"):
        bisect_versions(["a", "b"], lambda v: "pass")


def test_outcome_from_exit_code_follows_git_bisect_run():
    assert outcome_from_exit_code(0) == "good"
    assert outcome_from_exit_code(1) == "bad"
    assert outcome_from_exit_code(124) == "bad"
    assert outcome_from_exit_code(125) == "skip"
    assert outcome_from_exit_code(127) == "bad"
    for code in (128, 255, -1):
        with pytest.raises(ValueError, match="aborts"):
            outcome_from_exit_code(code)


def test_version_atoms_modes():
    assert version_atoms("/opt/nccl/lib/libnccl.so.2.21.5", "preload") == (
        Atom("LD_PRELOAD", "prepend", "/opt/nccl/lib/libnccl.so.2.21.5"),
    )
    assert version_atoms("/opt/ofi/lib/libnccl-net.so", "auto") == (
        Atom("LD_PRELOAD", "prepend", "/opt/ofi/lib/libnccl-net.so"),
    )
    assert version_atoms("/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib", "auto") == (
        Atom("LD_LIBRARY_PATH", "prepend", "/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib"),
    )
    assert version_atoms("/opt/nccl/lib/", "library_path") == (Atom("LD_LIBRARY_PATH", "prepend", "/opt/nccl/lib/"),)
    # a .so given for library_path means its directory
    assert version_atoms("/opt/nccl/lib/libnccl.so.2", "library_path") == (
        Atom("LD_LIBRARY_PATH", "prepend", "/opt/nccl/lib"),
    )
    # a directory whose name merely contains "so" is still a directory
    assert version_atoms("/opt/sockets/lib", "auto")[0].var == "LD_LIBRARY_PATH"
    assert version_atoms("/opt/x.so.d/", "auto")[0].var == "LD_LIBRARY_PATH"


@pytest.mark.parametrize(
    "path,mode,match",
    [
        ("/opt/nccl/lib", "preload", r"not a shared object for mode preload; allowed"),
        ("/opt/a.so", "ld_preload", r"mode 'ld_preload' unknown; allowed: auto, preload, library_path"),
        ("", "auto", "empty"),
        ("/a:/b", "auto", "contains ':'"),
        ("libnccl.so", "library_path", "no directory"),
    ],
)
def test_version_atoms_rejects(path, mode, match):
    with pytest.raises(ConfigError, match=match):
        version_atoms(path, mode)


def test_parse_versions_file():
    text = """\
# oldest first
/soft/nccl/2.18.5/lib

/soft/nccl/2.19.3/lib   # trailing comment
   /soft/nccl/2.21.5/lib/libnccl.so.2
"""
    assert parse_versions_file(text, "v.txt") == [
        "/soft/nccl/2.18.5/lib",
        "/soft/nccl/2.19.3/lib",
        "/soft/nccl/2.21.5/lib/libnccl.so.2",
    ]


def test_parse_versions_file_errors():
    with pytest.raises(ConfigError, match=r"^v.txt:3: '/a' is already listed on line 1; allowed"):
        parse_versions_file("/a\n/b\n/a\n", "v.txt")
    with pytest.raises(ConfigError, match=r"^v.txt: 1 version\(s\) listed; allowed: at least 2"):
        parse_versions_file("# only\n/a\n", "v.txt")


def test_exit_code_follows_the_project_convention():
    versions = vers(8)
    assert bisect_versions(versions, Oracle(versions, 5)).exit_code == 1  # a first bad version named
    assert bisect_versions(versions, lambda v: "good").exit_code == 0  # no regression
    assert bisect_versions(versions, Oracle(versions, 4, skips=[3])).exit_code == 3  # candidates 3 and 4
    assert bisect_versions(versions, lambda v: "bad").exit_code == 3  # no known good version
    assert bisect_versions(versions, lambda v: "skip").exit_code == 3
    assert bisect_versions(versions, lambda v: "good" if v == versions[0] else "skip").exit_code == 3


# a real probe per version: the "build" directory on LD_LIBRARY_PATH says whether it is bad or untestable
VERSION_PROBE = """
import os, sys
build = os.environ.get("LD_LIBRARY_PATH", "").split(":")[0]
marks = open(os.path.join(build, "marks")).read() if os.path.exists(os.path.join(build, "marks")) else ""
sys.exit(125 if "skip" in marks else 1 if "bad" in marks else 0)
"""


@pytest.mark.slow
@pytest.mark.parametrize("marks, code, first_bad", [
    ({2: "bad", 3: "bad"}, 1, "v2"),
    ({}, 0, None),
    ({1: "skip", 2: "bad", 3: "bad"}, 3, None),  # v1 skipped next to the first bad: ambiguous
])
def test_versions_cli_exit_codes_with_real_probes(cli, tmp_path, marks, code, first_bad):
    import json
    import sys

    script = tmp_path / "probe.py"
    script.write_text(VERSION_PROBE)
    builds = []
    for i in range(4):
        build = tmp_path / f"v{i}"
        build.mkdir()
        (build / "marks").write_text(marks.get(i, "good"))
        (build / "libnccl.so.2").write_bytes(b"")  # a build's file (the probe script never loads it)
        builds.append(str(build))
    done = cli.run("bisect", "backend=gloo", "--grid", "1x1", "--versions", *builds, "--probe-cmd", f"{sys.executable} {script}",
                   "--json", str(tmp_path / "r.json"), "--out", str(tmp_path / "o"))
    assert done.returncode == code, done.stdout + done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["first_bad"] and report["first_bad"].rsplit("/", 1)[1]) == first_bad


def test_versions_that_cannot_be_builds_are_refused_up_front(cli, tmp_path):
    # issue 39 point 12: gloo never loads NCCL, and a directory without a libnccl is not a build
    good, bad = tmp_path / "2.27", tmp_path / "2.28"
    for build in (good, bad):
        build.mkdir()
        (build / "libnccl.so.2").write_bytes(b"")
    gloo = cli.run("bisect", "--grid", "1x1", "--versions", str(good), str(bad), "backend=gloo", "--out", str(tmp_path / "o"))
    assert gloo.returncode == 2, gloo.stdout + gloo.stderr
    (line,) = gloo.stderr.strip().splitlines()
    assert "backend=gloo" in line and "never loads NCCL" in line  # backend=gloo after the paths is an override
    (tmp_path / "empty").mkdir()
    empty = cli.run("bisect", "--grid", "1x1", "--versions", str(good), str(tmp_path / "empty"), "backend=gloo",
                    "--probe-cmd", "true", "--out", str(tmp_path / "o"))
    assert empty.returncode == 2, empty.stdout + empty.stderr
    (line,) = empty.stderr.strip().splitlines()
    assert f"--versions {tmp_path / 'empty'}" in line and "no libnccl" in line
    assert not (tmp_path / "o").exists()
