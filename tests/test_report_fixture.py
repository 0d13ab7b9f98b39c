"""Every report renders from stored results alone: a process that only reads a stored run's results.json (plain
data) and renders every format, JUnit, the HTML page, the bench tables and a diff has neither the engine nor the
store loaded (reporting renders what it is given; app/report.py is where run directories are read).

The fixture is a real gloo run (tests/data/report_fixture/README.md says how it was made).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "data" / "report_fixture"
pytestmark = pytest.mark.slow  # one rendering process, about 3 s (matplotlib and jinja2 imports)

# Step 1 hands plain data over (results from JSON, the runs they stand for); step 2 renders; then the process
# says which envmatrix modules it loaded.
RENDER = r'''
import json, sys
from pathlib import Path

from envmatrix.env.atoms import Atom, Setup
from envmatrix.planning.grid import parse_grid
from envmatrix.planning.plan import ProbeSpec, Run
from envmatrix.results import ProbeResult

fixture = Path(sys.argv[1])
stored = json.loads((fixture / "results.json").read_text())
results = [ProbeResult.from_json(r) for r in stored["results"]]
runs = [Run(r.run_key, Setup(r.setup["name"], tuple(Atom.from_json(a) for a in r.setup.get("atoms", []))),
            parse_grid(r.grid), ProbeSpec.make(r.probe["name"], r.probe.get("params") or {}), r.backend, r.launcher)
        for r in results]

from envmatrix.judgement.regressions import diff_runs
from envmatrix.reporting import build_matrix, format_names, get_format
from envmatrix.reporting.bench_tables import bench_markdown
from envmatrix.reporting.diff import diff_text
from envmatrix.reporting.html import render_html
from envmatrix.reporting.html_model import RunData
from envmatrix.reporting.junit import junit_xml

matrix = build_matrix(runs, results, [r.grid for r in results])
rendered = {f"format {name}": [get_format(name).filename, get_format(name).render(matrix, results, stored["title"])]
            for name in format_names()}
rendered["junit"] = [None, junit_xml("envmatrix.report_fixture", results)]
rendered["html"] = [None, render_html(RunData(str(fixture), results), "report fixture")]
rendered["bench"] = [None, "\n".join(bench_markdown(r, r.setup_name) for r in results if r.metrics)]
rendered["diff"] = [None, diff_text(diff_runs(results, results, 5.0), "run_a", "run_b")]
loaded = sorted(m for m in sys.modules if m.startswith("envmatrix."))
print(json.dumps({"rendered": rendered, "loaded": loaded}))
'''


@pytest.fixture(scope="module")
def rendering() -> dict:
    proc = subprocess.run([sys.executable, "-c", RENDER, str(FIXTURE)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_no_engine_or_store_is_loaded_to_render_every_report(rendering):
    loaded = rendering["loaded"]
    assert "envmatrix.reporting.html" in loaded and "envmatrix.reporting.junit" in loaded  # it did render
    for layer in ("envmatrix.engine", "envmatrix.store", "envmatrix.app", "envmatrix.search", "envmatrix.launchers",
                  "envmatrix.execution"):
        assert not [m for m in loaded if m == layer or m.startswith(layer + ".")], f"{layer} loaded to render reports"


def test_every_registered_format_renders_the_stored_run_as_the_sweep_wrote_it(rendering):
    formats = {k: v for k, v in rendering["rendered"].items() if k.startswith("format ")}
    assert {"format markdown", "format json"} <= set(formats)
    for name, (filename, text) in formats.items():
        assert text == (FIXTURE / filename).read_text(), f"{name}: {filename} differs from the stored one"


def test_junit_html_bench_and_diff_render_the_stored_cells(rendering):
    text = {k: v[1] for k, v in rendering["rendered"].items()}
    assert text["junit"].count("<testcase") == 3 and text["junit"].count("<failure") == 1
    assert "Unable to find address for: envmatrix_no_such_if0" in text["junit"]
    html = text["html"]
    for shown in ("report fixture", "bad_iface", "init_error", "envmatrix_no_such_if0", "allreduce", "allgather", "<svg"):
        assert shown in html, shown
    assert "allreduce" in text["bench"] and "busbw" in text["bench"] and "bad_iface" not in text["bench"]
    assert "0 pass->fail" in text["diff"] and text["diff"].endswith("verdict: no regression")
    assert " 0 (collective, size) points compared" not in text["diff"]


def test_a_command_hands_its_stored_results_to_the_page_without_a_store_opened_again(tmp_path):
    from envmatrix.app.report import write_html_report
    from envmatrix.results import ProbeResult

    stored = [ProbeResult.from_json(r) for r in json.loads((FIXTURE / "results.json").read_text())["results"]]
    page = write_html_report(str(tmp_path), results=stored)  # tmp_path holds no store: only the results given
    assert "envmatrix_no_such_if0" in Path(page).read_text() and sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
