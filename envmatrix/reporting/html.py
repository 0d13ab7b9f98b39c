"""``report.html``: one self-contained page (inline SVG + CSS, no external fetch) rendered from a loaded run directory
(:class:`html_model.RunData`; app/report.py loads it and writes the page)."""

from __future__ import annotations

import datetime
import os
from typing import Optional

from envmatrix.reporting import plots
from envmatrix.reporting.conditions_tables import format_time, pattern_blocks
from envmatrix.reporting.hosts import HOST_COLUMNS, host_cells, host_rows
from envmatrix.reporting.pairs_tables import report_heatmaps
from envmatrix.reporting.text import visible
from envmatrix.reporting.html_model import RunData, build_curves, build_matrix_model, measured_trials

REPORT_NAME = "report.html"


def _shown(value):
    """Every value the page prints, before autoescape: a terminal escape or a bidi override a run recorded is shown as
    its escape (``\\x1b``), not put in the page (HTML has no place for control characters; a bidi override would
    reverse what follows it). Markup (the figures) is the page's own."""
    from markupsafe import Markup

    return value if isinstance(value, Markup) or not isinstance(value, str) else visible(value)


def _env():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("envmatrix.reporting", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_shown,
    )
    env.filters["duration"] = format_time  # the conditions tables' unit and rounding (ms below a second), as matrix.md
    return env


def preload_renderer(with_figures: bool = False) -> None:
    """Import jinja2 (and matplotlib when ``with_figures``: bench curves, search plots; about 2 s of imports) on a
    daemon thread, so that the report written after a sweep does not start with them; the runs leave the driver
    waiting on pipes. A pass/fail sweep's report draws only the matrix (plain SVG): importing matplotlib then
    would only take CPU from the runs (benchmarks/throughput.md)."""
    import threading

    def load() -> None:
        try:
            if with_figures:
                plots.load_pyplot()
            _env()
        except Exception:  # noqa: BLE001 - the report itself says what went wrong, later
            pass

    threading.Thread(target=load, name="envmatrix-report-preload", daemon=True).start()


def _shown_path(path: str) -> str:
    """Relative when under the working directory: checked-in examples do not carry one machine's paths."""
    full, here = os.path.abspath(path), os.getcwd()
    return os.path.relpath(full, here) if full.startswith(here + os.sep) else full


def render_html(data: RunData, title: Optional[str] = None) -> str:
    from markupsafe import Markup

    cells = data.cell_results
    if not cells and data.search is None:
        # a search's result store without its study (e.g. an archived results.sqlite): its trials are the cells
        cells = [r for r in data.results if not str(r.sweep_id or "").startswith("bisect-")]
    matrix = build_matrix_model(cells) if cells else None
    curves = build_curves(cells)
    search = data.search
    sections = {
        "matrix_svg": Markup(plots.matrix_heatmap(matrix)) if matrix else None,
        "curves": [(c, Markup(plots.size_curves(c, cs))) for c, cs in curves.items()],
        "bisects": [(b, Markup(plots.bisect_trail(b))) for b in data.bisects],
        "conditions": [(block, Markup(plots.conditions_plot(block))) for block in pattern_blocks(cells)
                       if any(value != "unshaped" for _, value in block.conditions)],
        "pairs": [Markup(h) for h in report_heatmaps(data.results)],  # bench --pairs (reporting/pairs_tables.py)
        "search_history": Markup(plots.search_history(search)) if search and search.trials else None,
        "search_importances": Markup(plots.search_importances(search)) if search and search.importances else None,
        "search_parallel": (Markup(plots.search_parallel(search))
                            if search and search.params and measured_trials(search.trials) else None),
    }
    failures = [c for c in (matrix.cells.values() if matrix else []) if c.outcome != "pass"]
    algorithms = [c for c in (matrix.cells.values() if matrix else []) if c.algorithms]
    versions = next((r.versions for r in data.results if r.versions), {})
    best = None
    if search:
        done = [t for t in search.trials if t.value is not None and t.state == "complete"]
        if done:
            best = (max if search.direction == "maximize" else min)(done, key=lambda t: t.value)
    return _env().get_template("report.html.j2").render(
        title=title or f"envmatrix report: {os.path.basename(os.path.abspath(data.run_dir))}",
        run_dir=_shown_path(data.run_dir),
        generated=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        matrix=matrix, failures=failures, algorithms=algorithms, versions=versions,
        hosts=[host_cells(row) for row in host_rows(cells)], host_columns=HOST_COLUMNS, search=search, best=best,
        n_results=len(data.results), outcome_colors=plots.OUTCOME_COLORS, **sections,
    )
