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
