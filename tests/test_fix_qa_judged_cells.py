"""Cells judged on what they measured, found by a QA pass with configs nobody tuned on (/tmp/qa_configs was its
scratch; real gloo ranks and the CLI as users run it):

1. expect: on a 3-rank grid. Split collectives (reduce_scatter, allgather, alltoall) are measured at nccl-tests'
   aligned size (10K on 3 ranks -> 10236 B), but expectations were matched on the size as written, so every such
   floor was stored as "not measured" and a cell far below it passed (1x2 of the same sweep was `slow`).
2. An unresolved cell (a command probe's exit 125) was drawn as `0` in matrix.md, whose legend says `0 = failure`,
   and written as a JUnit <failure>, while the sweep said "0 failed, N unresolved (inconclusive)" and exited 3.
3. A resume reused a stored pass after the caller's PATH or PYTHONPATH changed (another `all_reduce_perf` on PATH,
   a PYTHONPATH that shadows torch): "1 already in the store", exit 0, where a fresh store fails.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from conftest import write_conf

pytestmark = pytest.mark.slow

THREE_RANK_BENCH = """
name: {name}
backend: gloo
grids: [1x3]
setups:
  a: {{TORCH_DISTRIBUTED_DEBUG: "OFF"}}
probe:
  timeout_s: 60
  collectives: [allreduce]
  bench: {{collectives: [reduce_scatter], min_bytes: 10K, max_bytes: 10K, iters: 2, warmup: 1}}
"""


def test_expect_floor_on_three_ranks_judges_the_aligned_size(cli, tmp_path):
    conf = write_conf(tmp_path / "exp.yaml", THREE_RANK_BENCH.format(name="exp3")
                      + "expect:\n  reduce_scatter: {10K: {busbw_gbps: 1000}}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "run"), timeout=180)
    out = done.stdout + done.stderr
    # gloo on CPU moves far less than 1000 GB/s: the cell must be slow, not pass with its floor "not measured"
    assert "not measured" not in (tmp_path / "run" / "results.json").read_text(), out
    assert done.returncode == 1, out
    assert re.search(r"\(a\) 1x3 slow: reduce_scatter 10K busbw .* < expected 1000 GB/s", out), out


PROBE = """#!/bin/sh
[ "$QA_MODE" = unresolved ] && { echo "qa: cannot tell"; exit 125; }
exit 0
"""


def test_unresolved_cell_is_neither_a_failure_mark_nor_a_junit_failure(cli, tmp_path):
    probe = tmp_path / "probe.sh"
    probe.write_text(PROBE)
    probe.chmod(0o755)
    conf = write_conf(tmp_path / "codes.yaml", f"""
name: codes
backend: gloo
grids: [1x1]
setups:
  ok: {{QA_MODE: pass}}
  unres: {{QA_MODE: unresolved}}
probe: {{name: command, command: [{probe}], timeout_s: 30}}
""")
    junit = tmp_path / "junit.xml"
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "run"), "--allow-unknown-vars",
                   "--junit", str(junit), timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 3, out  # inconclusive (holds today)
    matrix = (tmp_path / "run" / "matrix.md").read_text()
    row = next(line for line in matrix.splitlines() if line.startswith("| 1x1 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "1", row
    assert cells[2] == "?", f"unresolved drawn as {cells[2]!r}; legend: 0 = failure\n{matrix}"
    assert "? = unresolved" in matrix
    case = next(c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "(unres) 1x1")
    assert case.find("failure") is None and case.find("skipped") is not None, ET.tostring(case).decode()


def _tool(dirpath, code):
    dirpath.mkdir()
    tool = dirpath / "qa_tool"
    tool.write_text(f"#!/bin/sh\necho qa_tool exits {code}\nexit {code}\n")
    tool.chmod(0o755)
    return dirpath


def test_resume_measures_again_after_the_callers_path_changes(cli, tmp_path):
    good, bad = _tool(tmp_path / "good", 0), _tool(tmp_path / "bad", 1)
    conf = write_conf(tmp_path / "tool.yaml", """
name: tool
backend: gloo
grids: [1x1]
setups: {a: {}}
probe: {name: command, command: [qa_tool], timeout_s: 30}
""")
    out = str(tmp_path / "run")
    path = cli.env["PATH"]
    cli.env["PATH"] = f"{good}:{path}"
    first = cli.run("sweep", f"conf={conf}", "--out", out, timeout=120)
    assert first.returncode == 0, first.stdout + first.stderr
    cli.env["PATH"] = f"{bad}:{path}"  # e.g. `module load` of another nccl-tests build
    again = cli.run("sweep", f"conf={conf}", "--out", out, timeout=120)
    assert "1 already in the store" not in again.stdout, again.stdout
    assert again.returncode == 1, again.stdout + again.stderr


def test_resume_measures_again_after_the_callers_pythonpath_changes(cli, tmp_path):
    shadow = tmp_path / "shadow" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("qa: another torch on PYTHONPATH")\n')
    conf = write_conf(tmp_path / "pp.yaml", """
name: pp
backend: gloo
grids: [1x2]
setups: {a: {TORCH_DISTRIBUTED_DEBUG: INFO}}
probe: {timeout_s: 60, collectives: [allreduce]}
""")
    out = str(tmp_path / "run")
    cli.env.pop("PYTHONPATH", None)
    first = cli.run("sweep", f"conf={conf}", "--out", out, timeout=120)
    assert first.returncode == 0, first.stdout + first.stderr
    cli.env["PYTHONPATH"] = str(shadow.parent)  # the driver never imports torch; the ranks do
    again = cli.run("sweep", f"conf={conf}", "--out", out, timeout=120)
    assert "1 already in the store" not in again.stdout, again.stdout
    assert again.returncode == 1, again.stdout + again.stderr
