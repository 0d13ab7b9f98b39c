"""The conftest's fast-lane guard really names, and when asked fails on, a slow test that lacks the marker."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")
SLEEPER = """
import time
import pytest

{mark}
def test_sleeps():
    time.sleep(0.3)

def test_quick():
    pass
"""


@pytest.fixture
def sleeper(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """A copy of the real tests/conftest.py beside a test that sleeps past a 0.15 s limit."""
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    monkeypatch.setenv("ENVMATRIX_SLOW_TEST_S", "0.15")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the check needs no plugin; loading all costs ~0.5 s
    monkeypatch.delenv("ENVMATRIX_FAIL_UNMARKED_SLOW", raising=False)

    def write(mark: str) -> None:
        pytester.makepyfile(test_sleeper=SLEEPER.format(mark=mark))

    return write


def test_an_unmarked_slow_test_fails_the_run_when_asked(pytester, sleeper, monkeypatch):
    sleeper("")
    monkeypatch.setenv("ENVMATRIX_FAIL_UNMARKED_SLOW", "1")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*tests over 0.15 s without @pytest.mark.slow*", "*s  test_sleeper.py::test_sleeps",
                                 "*this fails the run*"])
    assert "test_quick" not in result.stdout.str()


def test_without_the_switch_it_reports_but_passes(pytester, sleeper):
    sleeper("")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*s  test_sleeper.py::test_sleeps"])


def test_a_marked_slow_test_passes_silently(pytester, sleeper, monkeypatch):
    sleeper("@pytest.mark.slow")
    monkeypatch.setenv("ENVMATRIX_FAIL_UNMARKED_SLOW", "1")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    assert "without @pytest.mark.slow" not in result.stdout.str()


def test_a_slow_fixture_counts_against_its_test(pytester, sleeper, monkeypatch):
    pytester.makepyfile(test_fixture="""
import time
import pytest

@pytest.fixture
def costly():
    time.sleep(0.3)

def test_uses_it(costly):
    pass
""")
    monkeypatch.setenv("ENVMATRIX_FAIL_UNMARKED_SLOW", "1")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*s  test_fixture.py::test_uses_it"])


def test_under_xdist_the_controller_judges(pytester, sleeper, monkeypatch):
    pytest.importorskip("xdist")
    sleeper("")
    monkeypatch.setenv("ENVMATRIX_FAIL_UNMARKED_SLOW", "1")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*s  test_sleeper.py::test_sleeps"])


def test_the_limit_grows_only_when_workers_outnumber_cores(monkeypatch):
    from conftest import SLOW_S, _slow_limit_s

    monkeypatch.delenv("ENVMATRIX_SLOW_TEST_S", raising=False)
    cores = os.cpu_count() or 1
    with_workers = lambda n: _slow_limit_s(SimpleNamespace(option=SimpleNamespace(numprocesses=n)))  # noqa: E731
    assert with_workers(None) == with_workers(0) == with_workers(cores) == SLOW_S
    assert with_workers(2 * cores) == 2 * SLOW_S


def _workers_after_cmdline_main(xdist: bool = True, **given) -> tuple:
    from conftest import pytest_cmdline_main

    option = SimpleNamespace(**{"numprocesses": None, "dist": "no", "usepdb": False, "capture": "fd", **given})
    pytest_cmdline_main(SimpleNamespace(option=option, pluginmanager=SimpleNamespace(hasplugin=lambda name: xdist)))
    return option.numprocesses, option.dist


def test_the_suite_defaults_to_four_loadgroup_workers_unless_told_otherwise():
    from conftest import WORKERS

    assert _workers_after_cmdline_main() == (WORKERS, "loadgroup") == (4, "loadgroup")
    assert _workers_after_cmdline_main(numprocesses=2) == (2, "loadgroup")  # groups hold with any worker count
    assert _workers_after_cmdline_main(numprocesses=0) == (0, "no")
    assert _workers_after_cmdline_main(numprocesses=2, dist="loadfile") == (2, "loadfile")
    assert _workers_after_cmdline_main(usepdb=True) == (None, "no")
    assert _workers_after_cmdline_main(capture="no") == (None, "no")
    assert _workers_after_cmdline_main(xdist=False) == (None, "no")


@pytest.mark.slow  # starts four xdist workers
def test_real_workers_start_and_a_group_stays_on_one(pytester, sleeper):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_groups="""
import pytest

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    pass
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "xdist", "-v")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*4 workers [[]6 items[]]*", "*LoadGroupScheduling*"])
    workers = {line.split()[0] for line in result.stdout.lines if line.startswith("[gw") and "PASSED" in line}
    assert len(workers) == 1, result.stdout.str()  # "[gw2]": every grouped test on one worker
