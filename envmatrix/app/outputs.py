"""What every measuring command writes last: JUnit XML when asked, then RUN_DIR/report.html."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional


@dataclass(frozen=True)
class RunOutputs:
    run_dir: str
    junit: Optional[str] = None  # the JUnit XML written, when asked for
    html: Optional[str] = None  # RUN_DIR/report.html
    html_error: Optional[str] = None  # why report.html was not written ("TypeName: message")
    junit_error: Optional[str] = None  # why the JUnit XML was not written (the path went bad during the run)


def write_run_outputs(run_dir: str, junit_path: Optional[str] = None, suite: str = "envmatrix",
                      results: Iterable = (), stored: Optional[list] = None) -> RunOutputs:
    """``results``: the JUnit testcases; ``stored``: every result of the run directory's store, read by the
    command from the store it opened (the page is drawn from them instead of opening it again).

    A broken page or an output path that went bad during the run must not fail the measurement it follows
    (it is already stored): the error is returned, not raised."""
    junit = junit_error = None
    if junit_path:
        from envmatrix.reporting.junit import write_junit

        try:
            junit = write_junit(junit_path, suite, list(results))
        except OSError as exc:
            junit_error = f"{type(exc).__name__}: {exc}"
    from envmatrix.app.report import write_html_report

    try:
        return RunOutputs(run_dir, junit, html=write_html_report(run_dir, results=stored), junit_error=junit_error)
    except Exception as exc:
        return RunOutputs(run_dir, junit, html_error=f"{type(exc).__name__}: {exc}", junit_error=junit_error)
