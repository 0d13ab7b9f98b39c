"""matrix.md and bench_*.md from real runs whose setup names, env values and root-cause lines are hostile: a Markdown
parser (markdown-it, GFM tables) reads every table back with its header's column count, no raw HTML, link or image
comes from a value, and each name and value reads back as itself (a QA pass's findings)."""

from __future__ import annotations

import json
import sys

import pytest
import yaml
from markdown_it import MarkdownIt

from conftest import write_conf

# stderr of a failing setup: the root-cause line is its last line
PROBE = ("import os, sys\n"
         "v = os.environ.get('QA_FAIL')\n"
         "if v: sys.stderr.write('noise\\n<script>alert(3)</script> a|b `c` & [x](javascript:alert(4)) ' + v + '\\n')\n"
         "sys.exit(1 if v else 0)\n")

SETUPS = {
    "pi|pe": {"QA_V": "a|b"},
    "tick`s": {"QA_V": "x`y``z"},
    "<script>alert(1)": {"QA_V": "<script>alert('v')</script>"},
    "<img src=x onerror=alert(2)>": {"QA_V": "![i](http:x)"},
    "amp&\"quo'te": {"QA_V": "a&b \"c\" &amp; &lt;"},
    "nl": {"QA_V": "line1\nline2\r\nline3\rline4"},
    "long": {"QA_V": "L" * 10240},
    "שלום🙂": {"QA_V": "ünï 🙂 שלום"},
    "empty": {"QA_V": ""},
    "num": {"QA_V": "1e3", "QA_W": "007"},
    "bs": {"QA_V": "a\\|b\\"},
    "fail|<b>": {"QA_FAIL": "<i>x|y</i>"},
}


def hostile_sweep(cli, tmp_path, grids=("1x1",), extra=None) -> tuple[object, str]:
    """A real command-probe sweep of SETUPS (and ``extra``) into tmp_path/run: the failing setup's exit 1."""
    conf = {"name": "hostile", "backend": "gloo", "grids": list(grids), "setups": {**SETUPS, **(extra or {})},
            "probe": {"name": "command", "timeout_s": 60, "command": [sys.executable, "-c", PROBE]}}
    path = write_conf(tmp_path / "hostile.yaml", yaml.safe_dump(conf, allow_unicode=True))
    out = str(tmp_path / "run")
    done = cli.run("sweep", f"conf={path}", "--out", out, "--allow-unknown-vars", "--junit", str(tmp_path / "sweep.xml"))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # the one failing setup
    return done, out


def _cell(inline) -> tuple[str, list[str], list[str]]:
    """A cell's shown text, its code spans, and the kinds of any markup tokens in it."""
    text, code, markup = [], [], []
    for tok in inline.children or []:
        if tok.type in ("text", "code_inline"):
            text.append(tok.content)
            if tok.type == "code_inline":
                code.append(tok.content)
        elif tok.type not in ("softbreak",):
            markup.append(tok.type)
    return "".join(text), code, markup


def read_tables(markdown: str) -> list[list[list[tuple[str, list[str], list[str]]]]]:
    """Every GFM table as rows of cells; asserts nothing outside tables is raw HTML."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    assert not [t.content for t in tokens if t.type == "html_block"]
    tables, in_cell = [], False
    for tok in tokens:
        if tok.type == "table_open":
            tables.append([])
        elif tok.type == "tr_open":
            tables[-1].append([])
        elif tok.type in ("th_open", "td_open"):
            in_cell = True
        elif tok.type in ("th_close", "td_close"):
            in_cell = False
        elif tok.type == "inline" and in_cell:
            tables[-1][-1].append(_cell(tok))
        elif tok.type == "inline":
            assert not [c.type for c in tok.children or [] if c.type in ("html_inline", "link_open", "image")], tok.content
    return tables


def check_tables(markdown: str) -> list:
    tables = read_tables(markdown)
    for table in tables:
        width = len(table[0])
        assert all(len(row) == width for row in table), [len(row) for row in table]
        for row in table:
            for text, _, markup in row:
                assert not set(markup) & {"html_inline", "link_open", "image"}, (text, markup)
    return tables


@pytest.mark.slow
def test_matrix_md_of_hostile_names_and_values_stays_a_table_that_reads_back(cli, tmp_path):
    # Before: a setup named 'pi|pe' split the matrix's header into one more column than its delimiter row, so no
    # parser saw a table at all; '<script>' and '<img ...>' names went into the page as raw HTML; a value's '\r'
    # ended its legend row; a backtick in a value closed the legend's code span early.
    _, out = hostile_sweep(cli, tmp_path)
    with open(f"{out}/results.json") as fh:
        legend = json.load(fh)["legend"]
    tables = check_tables(open(f"{out}/matrix.md").read())
    matrix, setups, failures = tables[0], tables[1], tables[2]
    assert {c[0] for c in matrix[0]} == {"grid"} | {f"({name})" for name in SETUPS}
    assert len(matrix) == 2 and sorted(c[0] for c in matrix[1][1:]) == ["0"] + ["1"] * (len(SETUPS) - 1)
    shown = {row[0][0]: row[1][1] for row in setups[1:]}  # (name) -> the env cell's code spans
    assert set(shown) == {f"({name})" for name in SETUPS}
    for name, env in legend.items():
        (code,) = shown[f"({name})"]
        assert code == env.replace("\r\n", "\\r\\n").replace("\n", "\\n").replace("\r", "\\r"), name
    assert shown["(pi|pe)"][0].endswith("QA_V=a|b") and shown["(bs)"][0].endswith("QA_V=a\\|b\\")
    assert shown["(tick`s)"][0].endswith("QA_V=x`y``z") and len(shown["(long)"][0]) > 10240
    (failure,) = failures[1:]
    assert failure[0][0] == "(fail|<b>)"
    assert failure[5][0].endswith("<script>alert(3)</script> a|b `c` & [x](javascript:alert(4)) <i>x|y</i>")


@pytest.mark.slow
def test_bench_md_of_a_hostile_setup_reads_back(cli, tmp_path):
    # bench_*.md put the setup's name and env into its heading and a one-backtick code span as they were
    name, env = "p|<i>`x`", "a|b`c` <script>"
    conf = write_conf(tmp_path / "b.yaml", yaml.safe_dump({"name": "hb", "backend": "gloo", "setups": {name: {"QA_V": env}}}))
    done = cli.run("bench", f"conf={conf}", "--setup", name, "--grid", "1x1", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0",
                   "-c", "allreduce", "--out", str(tmp_path / "b"), "--allow-unknown-vars")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (page,) = (tmp_path / "b").glob("bench_*.md")
    text = page.read_text()
    tables = check_tables(text)
    assert tables and all(len(t) >= 2 for t in tables)
    tokens = MarkdownIt("commonmark").parse(text)
    heading = next(t for t in tokens if t.type == "inline")
    assert _cell(heading)[0] == f"envmatrix bench ({name}) on 1x1, gloo"
    setup_line = next(t for t in tokens if t.type == "inline" and t.content.startswith("setup ("))
    shown, code, markup = _cell(setup_line)
    assert shown.startswith(f"setup ({name}): ") and code == [f"QA_V={env}"] and not markup
