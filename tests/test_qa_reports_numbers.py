"""The numbers of report.html are those of the Markdown tables, in the same units and rounding (a QA pass's
findings): the network-conditions cells (matrix.md/console: ms below a second, seed 000's '541.0 ms') and a bisect's
repair busbw (GB/s, two decimals as bisect_*.md and every bench table)."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser

import pytest

from conftest import REPO
from test_network_physics import seed_000_results


class Cells(HTMLParser):
    """The text of each td of the tables whose class is ``cls`` (or every table)."""

    def __init__(self, cls: str = "") -> None:
        super().__init__()
        self.cls, self.inside, self.cell, self.cells = cls, False, None, []

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.inside = not self.cls or dict(attrs).get("class") == self.cls
        elif tag == "td" and self.inside:
            self.cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.cells.append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "table":
            self.inside = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def cells(page: str, cls: str = "") -> list[str]:
    parser = Cells(cls)
    parser.feed(page)
    return parser.cells


@pytest.mark.slow  # matplotlib's import for the conditions plot
def test_conditions_cells_of_the_page_read_as_matrix_md_writes_them(tmp_path):
    # Before: the page wrote '0.541 s (0.5402-0.5418) S/R 0.5369 s' where matrix.md and the console write
    # '541.0 ms (S/R 536.9)': another unit and another rounding for the same cell.
    from envmatrix.reporting.conditions_tables import block_rows, pattern_blocks
    from envmatrix.reporting.html import render_html
    from envmatrix.reporting.html_model import RunData

    results = seed_000_results()
    page = render_html(RunData(str(tmp_path), results))
    shown = cells(page, "conditions")
    (block,) = pattern_blocks(results)
    _, rows = block_rows(block)
    md = [cell for row in rows for cell in row]
    assert len(shown) == len(md) and shown[:2] == md[:2]
    for html_cell, md_cell in zip(shown, md):
        median = md_cell.split(" (")[0].split(" *")[0]  # '541.0 ms', as matrix.md writes it
        assert html_cell.startswith(median), (html_cell, md_cell)
    b1g = shown[md.index("b1g") + 2]
    assert b1g.startswith("541.0 ms (") and b1g.endswith("S/R 536.9 ms"), b1g
    assert any(c.startswith("5.40 s") for c in shown)  # a second and more: seconds, two decimals, as the md


@pytest.mark.slow  # one 'envmatrix report' process: about 2 s under load
def test_repair_busbw_of_the_page_reads_as_bisect_md_writes_it(tmp_path, cli):
    # Before: '%.3g' (335) where bisect_*.md writes busbw with two decimals (335.48), under a header without unit
    run = tmp_path / "run"
    shutil.copytree(REPO / "reports" / "examples" / "h200_bisect_seed003", run, ignore=shutil.ignore_patterns("report.html"))
    reports = json.loads((run / "bisect.json").read_text())
    reports[0]["repairs"][0]["busbw"] = 335.4789  # a recorded H200 bisect; its repairs ran without a bench
    (run / "bisect.json").write_text(json.dumps(reports))
    done = cli.run("report", str(run))
    assert done.returncode == 0, done.stderr
    page = (run / "report.html").read_text()
    assert "<th>busbw (GB/s)</th>" in page
    assert "335.48" in cells(page) and not re.search(r"<td>335</td>", page)
