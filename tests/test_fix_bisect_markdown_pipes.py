"""bisect_*.md keeps its tables when a value holds '|' (a pipe in a shell command, a regex in an include list): the
atom sat in a one-backtick span without escaping, and GFM split the row before it saw the code span."""

import sys

import pytest
from markdown_it import MarkdownIt

from conftest import bisect_with_probe_script

PROBE = """
import os, sys
if "|" in os.environ.get("QA_FILTER", ""):
    print("RuntimeError: filter with a pipe refused", flush=True)
    sys.exit(1)
"""


def _tables(text):
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    rows, tables, cells = [], [], None
    for tok in tokens:
        if tok.type == "table_open":
            rows = []
        elif tok.type == "tr_open":
            cells = []
        elif tok.type == "inline" and cells is not None:
            cells.append(tok.content)
        elif tok.type == "tr_close":
            rows.append(cells)
            cells = None
        elif tok.type == "table_close":
            tables.append(rows)
    return tables


@pytest.mark.slow
def test_atom_and_repair_tables_stay_tables(cli, tmp_path):
    env = ["QA_FILTER='a|b`c'", "QA_OTHER=1"]
    done, report = bisect_with_probe_script(cli, tmp_path, PROBE, env)
    assert done.returncode == 1, done.stdout + done.stderr
    (md,) = (tmp_path / "o").glob("bisect_*.md")
    tables = _tables(md.read_text())
    atoms = next(t for t in tables if t[0] == ["atom", "assignment"])
    assert all(len(row) == 2 for row in atoms), atoms
    assert any("a|b`c" in row[1] for row in atoms), atoms
    repair = next(t for t in tables if t[0][0] == "variable")
    assert all(len(row) == 5 for row in repair), repair
