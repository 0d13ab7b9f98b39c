"""bench's, bench --pairs' and search's closing report.html read the store's cells through app/report.stored_cells, as
``envmatrix report``, sweep and bisect do: they drew them from ``store.latest()``, so a sweep cell the sweep reused
from an earlier bisect probe (stored under the bisect's sweep_id) vanished from the page they rewrote."""

from __future__ import annotations

import sys

import pytest

from conftest import assert_no_processes, write_conf


def _swept_a_bisect_probe(cli, tmp_path):
    """A run dir whose only sweep cell (setup 'mine') is a bisect's probe, reused by the sweep; its report shows it."""
    probe = f"[{sys.executable}, -c, \"import os, sys; sys.exit(os.environ.get('ENVMATRIX_QA') == 'bad')\"]"
    conf = write_conf(tmp_path / "c.yaml", f"name: adopt\nbackend: gloo\ngrids: [1x1]\nsetups:\n  mine: {{ENVMATRIX_QA: bad}}\n"
                                           f"probe: {{name: command, timeout_s: 60, command: {probe}}}\n")
    (tmp_path / "bad.env").write_text("export ENVMATRIX_QA=bad\n")
    out = tmp_path / "o"
    assert cli.run("bisect", f"conf={conf}", "--env-file", str(tmp_path / "bad.env"), "--grid", "1x1", "--out", str(out),
                   "--allow-unknown-vars").returncode == 1
    swept = cli.run("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars")
    assert swept.returncode == 1 and "1 already in the store" in swept.stdout, swept.stdout + swept.stderr
    assert "(mine)" in (out / "report.html").read_text()
    (out / "report.html").unlink()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["bench", "backend=gloo", "--grid", "1x1", "-c", "allreduce", "-b", "8", "-e", "64", "-n", "2", "-w", "0"],
    ["bench", "backend=gloo", "--pairs", "hosts", "--grid", "2x1", "--pair-size", "64", "--latency-size", "8", "-n", "2",
     "-w", "0", "--iperf-seconds", "1"],
    ["search", "--trials", "2"],
], ids=["bench", "pairs-hosts", "search"])
def test_the_closing_page_keeps_a_sweep_cell_reused_from_a_bisect_probe(cli, tmp_path, command):
    from search_helpers import fake_conf

    out = _swept_a_bisect_probe(cli, tmp_path)
    if command[0] == "search":
        command = [*command, f"conf={fake_conf(tmp_path / 'fake.yaml')}"]
    done = cli.run(*command, "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    page = (out / "report.html").read_text()
    assert "(mine)" in page  # the sweep's cell, beside the bench's own
    assert_no_processes(cli.marker)
