"""``envmatrix diff``'s lifecycle: read both run directories' cells, then judge run B against run A."""

from __future__ import annotations

from envmatrix.app.report import load_results
from envmatrix.errors import ConfigError
from envmatrix.judgement.regressions import RunDiff, diff_runs, parse_threshold
from envmatrix.reporting.html_model import cell_results


def diff_run_dirs(run_a: str, run_b: str, busbw_drop: str) -> RunDiff:
    """Cells that flipped and busbw drops beyond ``busbw_drop`` (``5%``); ConfigError (exit 2) on bad input."""
    threshold = parse_threshold(busbw_drop)
    runs = []
    for path in (run_a, run_b):
        stored = load_results(path, "diff")
        results = cell_results(stored)
        if not results:
            # a search's or a bisect's probes are no cells of a matrix: say what is there, not that nothing is
            held = f"only search or bisect probes ({len(stored)})" if stored else "no results (results.sqlite or results.json)"
            raise ConfigError(f"diff: {path}: {held}; allowed: the run directory of a sweep or a bench")
        runs.append(results)
    return diff_runs(runs[0], runs[1], threshold)
