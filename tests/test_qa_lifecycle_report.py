"""A bisect's report pages agree with each other, from a real bisect (a QA pass's findings)."""

from __future__ import annotations

import html
import re
import subprocess

import pytest

from conftest import assert_no_processes, bisect_with_probe_script

FAILS_ON_BAD_DIR = """
import os, sys
sys.exit(1 if "/opt/bad/lib" in os.environ.get("LD_LIBRARY_PATH", "").split(":") else 0)
"""


def _sourced_path(lines: list[str]) -> str:
    script = "LD_LIBRARY_PATH=/base\n" + "\n".join(lines) + '\nprintf %s "$LD_LIBRARY_PATH"'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
def test_html_recommended_env_sources_like_the_markdown_one(cli, tmp_path):
    # report.html listed the recommended env's atoms in reading order (good, then hwloc) where the Markdown report
    # prints export lines (hwloc's first): pasted top to bottom, the page's lines put hwloc ahead of good.
    env = ["LD_LIBRARY_PATH=/opt/hwloc/lib:$LD_LIBRARY_PATH", "LD_LIBRARY_PATH=/opt/bad/lib:$LD_LIBRARY_PATH",
           "LD_LIBRARY_PATH=/opt/good/lib:$LD_LIBRARY_PATH", "NCCL_DEBUG=WARN"]
    done, report = bisect_with_probe_script(cli, tmp_path, FAILS_ON_BAD_DIR, env)
    assert done.returncode == 1 and report["culprits"] == [["LD_LIBRARY_PATH=/opt/bad/lib:$LD_LIBRARY_PATH"]], done.stdout
    out = tmp_path / "o"
    (markdown,) = out.glob("bisect_*.md")
    md_lines = markdown.read_text().split("```bash\n")[1].split("\n```")[0].splitlines()
    assert cli.run("report", str(out)).returncode == 0
    page = (out / "report.html").read_text()
    html_lines = html.unescape(re.search(r"recommended env:</p><pre>(.*?)</pre>", page, re.S).group(1)).splitlines()
    assert html_lines == md_lines
    assert _sourced_path(html_lines) == "/opt/good/lib:/opt/hwloc/lib:/base"
    assert_no_processes(cli.marker)


@pytest.mark.slow
def test_a_sweep_cell_reused_from_a_bisect_probe_is_a_cell_of_every_report(cli, tmp_path):
    # A sweep reuses a stored run of the same env, and a bisect's probe row keeps the bisect's sweep_id, which
    # reports leave out as "not a cell": diff of that run dir said "no sweep or bench results there" (exit 2), and
    # report.html and a later sweep's matrix.md lacked the cell.
    import json
    import sys

    from conftest import write_conf

    probe = f"[{sys.executable}, -c, \"import os, sys; sys.exit(os.environ.get('ENVMATRIX_QA') == 'bad')\"]"
    conf = write_conf(tmp_path / "c.yaml", f"name: adopt\nbackend: gloo\ngrids: [1x1]\nsetups:\n  mine: {{ENVMATRIX_QA: bad}}\n"
                                           f"probe: {{name: command, timeout_s: 60, command: {probe}}}\n")
    (tmp_path / "bad.env").write_text("export ENVMATRIX_QA=bad\n")
    out = str(tmp_path / "o")
    assert cli.run("bisect", f"conf={conf}", "--env-file", str(tmp_path / "bad.env"), "--grid", "1x1", "--out", out,
                   "--allow-unknown-vars").returncode == 1
    swept = cli.run("sweep", f"conf={conf}", "--out", out, "--allow-unknown-vars")
    assert swept.returncode == 1 and "1 already in the store" in swept.stdout, swept.stdout + swept.stderr
    diff = cli.run("diff", out, out, "--json")
    assert diff.returncode == 0 and json.loads(diff.stdout)["cells_compared"] == 1, diff.stdout + diff.stderr
    assert cli.run("report", out).returncode == 0 and "(mine)" in (tmp_path / "o" / "report.html").read_text()
    (tmp_path / "o" / "report.html").unlink()  # the bisect's closing page draws the cell too
    assert cli.run("bisect", f"conf={conf}", "--env-file", str(tmp_path / "bad.env"), "--grid", "1x1", "--out", out,
                   "--allow-unknown-vars").returncode == 1
    assert "(mine)" in (tmp_path / "o" / "report.html").read_text()
    # a sweep of another setup only: its matrix.md shows the store's cells, 'mine' among them
    later = cli.run("sweep", f"conf={conf}", "setups={other: {ENVMATRIX_QA: ok}}", "--out", out, "--allow-unknown-vars")
    matrix = (tmp_path / "o" / "matrix.md").read_text()
    assert later.returncode == 0 and "| grid | (other) | (mine) |" in matrix and "| 1x1 | 1 | 0 |" in matrix, matrix
    assert_no_processes(cli.marker)


@pytest.mark.slow
def test_diff_of_a_cell_run_b_could_not_test_is_inconclusive_not_a_regression(cli, tmp_path):
    # A command probe's exit 125 is 'cannot test' (unresolved, sweep exit 3): diff called pass -> unresolved a
    # regression, exit 1, the upgrade gate failing on a cell it never measured in run B.
    import json

    from conftest import write_conf

    def run(name: str, code: int) -> str:
        conf = write_conf(tmp_path / f"{name}.yaml", f"name: {name}\nbackend: gloo\ngrids: [1x1]\nsetups:\n  s: {{}}\n"
                                                     f"probe: {{name: command, timeout_s: 60, command: [/bin/sh, -c, 'exit {code}']}}\n")
        out = str(tmp_path / name)
        assert cli.run("sweep", f"conf={conf}", "--out", out).returncode == (0 if code == 0 else 3)
        return out

    before, after = run("before", 0), run("after", 125)
    done = cli.run("diff", before, after, "--json")
    assert done.returncode == 3, done.stdout + done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["pass_to_fail"] == [] and verdict["untested"] == [["s", "1x1", "gloo"]] and verdict["inconclusive"]
    text = cli.run("diff", before, after)
    assert text.returncode == 3 and "run B could not test 1 (unresolved)" in text.stdout, text.stdout
    assert cli.run("diff", after, before).returncode == 0  # run A never measured it: nothing was promised
