"""report.html from real runs with hostile setup names, env values and root-cause lines (a QA pass's findings)."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from conftest import Cli, write_conf


@pytest.mark.slow
def test_a_setup_name_with_dollars_is_drawn_as_written(cli, tmp_path):
    # Before: matplotlib read '$^^$' in the curve legend as mathtext and raised, so the bench wrote no report.html
    # ('html report not written: ValueError ... ParseSyntaxException'); 'a$b$c' came out as a, italic b, c.
    name = "x$^^$y"
    conf = write_conf(tmp_path / "c.yaml", yaml.safe_dump({"name": "d", "backend": "gloo", "setups": {name: {"QA_V": "1"}}}))
    done = cli.run("bench", f"conf={conf}", "--setup", name, "--grid", "1x1", "-b", "1K", "-e", "2K", "-n", "1", "-w", "0",
                   "-c", "allreduce", "--out", str(tmp_path / "b"), "--allow-unknown-vars")
    assert done.returncode == 0 and "html report:" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    page = (tmp_path / "b" / "report.html").read_text()
    assert 'data-plot="curve-allreduce"' in page and f"({name}) 1x1</text>" in page


HIDDEN = "\x1b[31m red \x07 \u202eesrever\u202c"
CONTROL_IN_PAGE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


class Page(HTMLParser):
    """Start tags with their attributes, and the text of each table cell."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.cells: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "td":
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.cells.append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def hostile_page(tmp_path_factory) -> Path:
    from test_qa_reports_markdown import hostile_sweep

    tmp = tmp_path_factory.mktemp("hostile_html")
    hostile_sweep(Cli(tmp), tmp, grids=("1x1", "1x2"), extra={"hidden\u202e": {"QA_V": HIDDEN}, "fail2": {"QA_FAIL": HIDDEN}})
    return tmp / "run" / "report.html"


@pytest.mark.slow
def test_hostile_values_are_text_of_the_page_not_markup(hostile_page):
    from test_qa_reports_markdown import SETUPS

    page = Page()
    page.feed(hostile_page.read_text())
    page.close()
    # the template's one self-check script; no tag or handler came from a name, a value or a root-cause line
    assert [t for t, _ in page.tags].count("script") == 1
    assert not [(t, a) for t, a in page.tags if t in ("img", "i", "iframe", "link", "object")]
    assert not [(t, a) for t, a in page.tags if any(k.startswith("on") for k in a)]
    assert not [(t, a) for t, a in page.tags if any(str(v).startswith(("http:", "https:", "//")) for k, v in a.items()
                                                    if k in ("src", "href") and t != "svg")]
    for name in SETUPS:
        assert f"({name})" in page.cells, name
    assert "(hidden\\u202e)" in page.cells
    legend = {cell: page.cells[i + 1] for i, cell in enumerate(page.cells[:-1]) if cell.startswith("(")}
    assert legend["(pi|pe)"].endswith("QA_V=a|b") and legend["(bs)"].endswith("QA_V=a\\|b\\")
    assert any(c.endswith("<script>alert(3)</script> a|b `c` & [x](javascript:alert(4)) <i>x|y</i>") for c in page.cells)


@pytest.mark.slow
def test_no_control_or_bidi_character_reaches_the_page(hostile_page):
    # Before: a root-cause line's terminal escapes and an env value's NUL, bell and right-to-left override went into
    # the page as they were (HTML has no place for them; the override reversed the text after it).
    text = hostile_page.read_text()
    assert not CONTROL_IN_PAGE.findall(text), sorted(set(CONTROL_IN_PAGE.findall(text)))
    assert html.escape("\\x1b[31m red \\x07 \\u202eesrever\\u202c", quote=False) in text


@pytest.mark.slow
def test_hostile_page_loads_in_chromium_without_console_messages(hostile_page):
    from report_helpers import load_page  # skips, saying so, where chromium is not installed

    loaded = load_page(hostile_page)
    assert loaded.console == [], loaded.console
    assert loaded.figures >= 1 and loaded.drawn == loaded.figures
    assert "alert" not in "".join(loaded.console)


@pytest.mark.slow
def test_a_10_kb_value_wraps_in_its_cell(hostile_page, tmp_path):
    # Before: the legend's one 10 kB value (no space to break at) made the page 68337 px wide at a 1280 px window
    from report_helpers import load_page

    probe = tmp_path / "width.html"
    probe.write_text(hostile_page.read_text().replace("</body>", '<script>window.addEventListener("load", function () '
                     '{ document.body.setAttribute("data-width", String(document.documentElement.scrollWidth)); });'
                     "</script></body>"))
    loaded = load_page(probe)
    width = int(re.search(r'data-width="(\d+)"', loaded.dom).group(1))
    assert width <= 1300, width  # the body's own max-width is 1200 px; the window is chromium's default


@pytest.mark.slow
def test_figures_of_one_page_share_no_element_id(cli, tmp_path):
    # Before: every matplotlib figure names its parts figure_1, axes_1, patch_1, ...: a bench of two collectives
    # put two curve figures on the page with some 120 ids each defined twice (invalid HTML; a reference may resolve
    # to the other figure's element)
    from report_helpers import load_page

    done = cli.run("bench", "backend=gloo", "--grid", "1x2", "-b", "1K", "-e", "4K", "-n", "1", "-w", "0",
                   "-c", "allreduce,allgather", "--out", str(tmp_path / "b"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    page = Page()
    text = (tmp_path / "b" / "report.html").read_text()
    page.feed(text)
    ids = [a["id"] for _, a in page.tags if "id" in a]
    assert len(ids) > 100 and len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})[:10]
    defined = set(ids)
    refs = re.findall(r'(?:href="#|url\(#)([^")]+)', text)
    assert refs and set(refs) <= defined  # every marker and clip path a figure uses is its own
    loaded = load_page(tmp_path / "b" / "report.html")  # the matrix and the two curve figures, each laid out
    assert loaded.console == [] and loaded.figures == loaded.drawn == 3, (loaded.console, loaded.figures, loaded.drawn)
