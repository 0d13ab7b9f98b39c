"""--junit from a real sweep whose failing rank writes terminal escapes, NUL and a bell to its log, and whose env holds
an escape and a newline: the XML parses (xml.etree) in the usual JUnit shape and shows those characters escaped (a
QA pass's finding)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import pytest
import yaml

from conftest import write_conf

PROBE = ("import os, sys\n"
         "v = os.environ.get('QA_FAIL')\n"
         "if v: sys.stderr.write('noise \\x00nul \\x07bell\\n\\x1b[31mERROR\\x1b[0m <b>&amp;</b> ' + v + '\\n')\n"
         "sys.exit(1 if v else 0)\n")


@pytest.mark.slow
def test_junit_of_a_log_with_terminal_escapes_and_nul_parses(cli, tmp_path):
    # Before: the log tail and the root-cause line went into the XML as they were; XML 1.0 has no NUL, bell or
    # ESC, so the file CI reads failed to parse ('not well-formed (invalid token)').
    setups = {"ok": {"QA_V": "line1\nline2"}, "bad\x1b[1m": {"QA_FAIL": "\x1b[1mbold\x1b[0m"}}
    conf = {"name": "ctrl", "backend": "gloo", "grids": ["1x1"], "setups": setups,
            "probe": {"name": "command", "timeout_s": 60, "command": [sys.executable, "-c", PROBE]}}
    path = write_conf(tmp_path / "c.yaml", yaml.safe_dump(conf))
    xml_path = tmp_path / "sweep.xml"
    done = cli.run("sweep", f"conf={path}", "--out", str(tmp_path / "run"), "--allow-unknown-vars", "--junit", str(xml_path))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    root = ET.parse(xml_path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert {"name", "tests", "failures", "errors", "skipped", "time"} <= set(suite.attrib)
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"(ok) 1x1", "(bad\\x1b[1m) 1x1"} and suite.get("tests") == "2" and suite.get("failures") == "1"
    for case in cases.values():
        assert {"classname", "name", "time"} <= set(case.attrib) and float(case.get("time")) >= 0
    failure = cases["(bad\\x1b[1m) 1x1"].find("failure")
    assert failure.get("type") == "exit_error"
    assert failure.get("message").endswith("\\x1b[31mERROR\\x1b[0m <b>&amp;</b> \\x1b[1mbold\\x1b[0m"), failure.get("message")
    assert "noise \\x00nul \\x07bell\n" in failure.text  # the log tail keeps its lines
    assert cases["(ok) 1x1"].find("failure") is None
    assert cases["(ok) 1x1"].find("system-out").text == "QA_V=line1\\nline2"  # one line per variable


@pytest.mark.slow
def test_junit_has_a_testcase_per_network_condition(cli, tmp_path):
    # Before: testcases were keyed by (setup, grid), so a sweep with a network axis (a column per condition, as
    # matrix.md shows) wrote one testcase for both conditions: the last one run, a failure under the other hidden
    conf = write_conf(tmp_path / "n.yaml", yaml.safe_dump({
        "name": "netj", "backend": "gloo", "grids": ["2x1"], "setups": {"base": {}},
        "network": {"default": {}, "b1g": {"rate": "1gbit"}},
        "launcher_opts": {"local": {"emulate_hosts": {"namespaces": True}}},  # two namespace hosts, a link to shape
        "probe": {"timeout_s": 60, "collectives": ["allreduce"]}}))
    xml_path = tmp_path / "n.xml"
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"), "--junit", str(xml_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    matrix = (tmp_path / "o" / "matrix.md").read_text()
    assert "| grid | (base @ b1g) | (base @ default) |" in matrix, matrix  # safe_dump sorted the conditions
    suite = ET.parse(xml_path).getroot().find("testsuite")
    assert sorted(c.get("name") for c in suite.findall("testcase")) == ["(base @ b1g) 2x1", "(base @ default) 2x1"]
    assert suite.get("tests") == "2"
