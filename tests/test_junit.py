"""--junit on sweep and bisect: one testcase per (setup, grid), the root-cause line as the failure message."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import REPO, pass_and_fail_conf
from envmatrix.app.report import load_results
from envmatrix.reporting.junit import junit_xml


def _cases(xml: str) -> dict[str, ET.Element]:
    root = ET.fromstring(xml.encode())
    return {c.get("name"): c for c in root.iter("testcase")}


def test_recorded_gpu_matrix_as_junit():
    results = load_results(str(REPO / "reports" / "examples" / "h200_transports"))
    xml = junit_xml("envmatrix.sweep.h200_transports", results)
    cases = _cases(xml)
    assert len(cases) == len({(r.setup_name, r.grid) for r in results}) == 27
    suite = ET.fromstring(xml.encode()).find("testsuite")
    failing = {f"({r.setup_name}) {r.grid}": r for r in results if not r.passed}
    assert suite.get("failures") == str(len(failing)) and suite.get("tests") == "27"
    for name, case in cases.items():
        failure = case.find("failure")
        if name not in failing:
            assert failure is None, name
            continue
        r = failing[name]
        assert failure.get("type") == r.outcome
        assert failure.get("message") == f"{r.outcome}: rank {r.root_cause['rank']}: {r.root_cause['line']}"
    assert "Failed to initialize any NET plugin" in cases["(bad_plugin) 2x2"].find("failure").get("message")




@pytest.mark.slow
def test_sweep_junit(cli, tmp_path):
    conf = pass_and_fail_conf(tmp_path / "c.yaml", "junit_demo")
    xml_path = tmp_path / "ci" / "sweep.xml"
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "run"), "--junit", str(xml_path))
    assert done.returncode == 1, done.stdout + done.stderr  # a failed cell: exit 1
    cases = _cases(xml_path.read_text())
    assert set(cases) == {"(baseline) 1x2", "(missing_if) 1x2"}
    assert cases["(baseline) 1x2"].find("failure") is None
    failure = cases["(missing_if) 1x2"].find("failure")
    assert failure.get("type") == "init_error" and "envmx_missing0" in failure.get("message")
    assert "Traceback" in failure.text  # the root-cause rank's log tail, for the CI log view
    assert cases["(missing_if) 1x2"].find("system-out").text == "GLOO_SOCKET_IFNAME=envmx_missing0"


BREAKS_ON_B = "import os, sys; sys.exit(1 if os.environ.get('ENVMATRIX_B') == '1' else 0)"


@pytest.mark.slow
def test_bisect_junit(cli, tmp_path):
    env_file = tmp_path / "env.sh"
    env_file.write_text("ENVMATRIX_A=1\nENVMATRIX_B=1\nENVMATRIX_C=1\n")
    script = tmp_path / "probe.py"
    script.write_text(BREAKS_ON_B)
    xml_path = tmp_path / "bisect.xml"
    done = cli.run("bisect", "backend=gloo", "--grid", "1x1", "--env-file", str(env_file), "--probe-cmd",
                   f"{sys.executable} {script}", "--out", str(tmp_path / "run"), "--junit", str(xml_path), "--no-repair",
                   "--allow-unknown-vars")
    assert done.returncode == 1, done.stdout + done.stderr  # culprits found
    cases = _cases(xml_path.read_text())
    stored = [r for r in load_results(str(tmp_path / "run")) if str(r.sweep_id).startswith("bisect-")]
    assert len(cases) == len(stored) >= 3  # every probe of this bisect, one testcase each
    failed = {n for n, c in cases.items() if c.find("failure") is not None}
    assert failed == {f"({r.setup_name}) 1x1" for r in stored if not r.passed} and failed
    for name in failed:
        assert "ENVMATRIX_B=1" in cases[name].find("system-out").text
