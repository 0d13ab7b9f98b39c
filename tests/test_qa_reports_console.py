"""The console's matrix from real sweeps: many setups still show every cell, and a root-cause line's terminal escapes
are shown, not sent to the terminal (a QA pass's findings)."""

from __future__ import annotations

import re
import sys

import pytest
import yaml

from conftest import write_conf

PROBE = ("import os, sys\n"
         "v = os.environ.get('QA_FAIL')\n"
         "if v: sys.stderr.write('\\x1b]0;pwned\\x07\\x1b[31mERROR\\x1b[0m ' + v + '\\n')\n"
         "sys.exit(1 if v else 0)\n")


@pytest.mark.slow
@pytest.mark.parametrize("columns", ["200", "80"])
def test_a_sweep_of_40_setups_prints_every_cell(cli, tmp_path, columns):
    # Before: rich shrank 41 columns to nothing on a 200-column terminal and the matrix printed empty boxes, no 1 or
    # 0 at all; now setups become rows where the setups' columns do not fit (as report.html's heatmap does).
    setups = {f"s{i:02d}": {"QA_I": str(i)} for i in range(40)}
    setups["bad"] = {"QA_FAIL": "\x1b[1mbold"}
    conf = write_conf(tmp_path / "c.yaml", yaml.safe_dump({
        "name": "many", "backend": "gloo", "grids": ["1x1"], "setups": setups,
        "probe": {"name": "command", "timeout_s": 60, "command": [sys.executable, "-c", PROBE]}}))
    cli.env["COLUMNS"] = columns
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"), "--allow-unknown-vars")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    matrix = done.stdout.split("setups (diff against the first)")[0]
    assert re.search(r"┃ setup +┃ 1x1 ┃", matrix), matrix[:2000]
    shown = dict(re.findall(r"│ \((\w+)\) +│ +([01]) +│", matrix))
    assert shown == {**{name: "1" for name in setups}, "bad": "0"}, matrix[:3000]
    assert max(len(line) for line in matrix.splitlines() if line[:1] in "┏┃┡│└") <= int(columns)
    # the failing rank's OSC title escape and colours: shown as text in the progress line and the tables
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "\\x1b]0;pwned\\x07\\x1b[31mERROR\\x1b[0m \\x1b[1mbold" in done.stdout
