"""rich rendering: live sweep progress and the matrix tables on screen."""

from __future__ import annotations

import time
from typing import Optional, Protocol, Sequence

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from envmatrix.reporting.hosts import HOST_COLUMNS, host_cells, host_rows
from envmatrix.reporting.matrix import Matrix
from envmatrix.reporting.text import one_line, visible
from envmatrix.planning.plan import Run
from envmatrix.results import ProbeResult


class Progress(Protocol):
    """What the console reads of a command's progress (the engine's TrialProgress is one): reporting names no
    layer above it."""

    total: int
    skipped: int
    skipped_failed: int
    rerun: int
    done: int
    passed: int
    failed: int
    current: Optional[Run]

    @property
    def remaining(self) -> int: ...

    def eta_s(self) -> Optional[float]: ...


def resume_hint(p: Progress) -> str:
    """What a resumed command says about the stored results it will not run again (or, with --rerun, will)."""
    if p.rerun:
        return f"{p.rerun} already in the store run again (--rerun: new attempts, history kept)"
    failed = f" ({p.skipped_failed} failed: --rerun runs them again)" if p.skipped_failed else ""
    return f"{p.skipped} already in the store{failed}"


def _fmt_eta(seconds: Optional[float]) -> str:
    if seconds is None:
        return "?"
    return time.strftime("%H:%M:%S", time.gmtime(seconds)) if seconds >= 60 else f"{seconds:.0f}s"


class LiveProgress:
    """A sweep listener: done/total, pass/fail, current setup x grid, ETA."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live: Optional[Live] = None
        self.last: Optional[str] = None

    def _render(self, p: Progress) -> Group:
        current = f"({p.current.setup.name}) on {p.current.grid.label}" if p.current else "-"
        line = Text.assemble(
            ("sweep ", "bold"),
            f"{p.done + p.skipped}/{p.total} ",
            (f"pass {p.passed} ", "green"),
            (f"fail {p.failed} ", "red" if p.failed else "dim"),
            (f"resumed {p.skipped} ", "dim"),
            f"now {current}  ETA {_fmt_eta(p.eta_s())}",
        )
        return Group(line, Text(self.last or "", style="dim"))

    def __call__(self, event: str, progress: Progress, result: Optional[ProbeResult]) -> None:
        if event == "start":
            if progress.skipped_failed:
                self.console.print(resume_hint(progress), markup=False)
            self.live = Live(self._render(progress), console=self.console, refresh_per_second=4, transient=False)
            self.live.start()
            return
        if result is not None:
            mark = "pass" if result.passed else f"{result.outcome}: {result.root_cause.get('line') or ''}"[:160]
            self.last = one_line(f"({result.column}) {result.grid}: {mark}")
        if self.live is not None:
            self.live.update(self._render(progress))
            if event == "end":
                self.live.stop()


_CELL_STYLE = {"1": "green", "0": "bold red", "s": "bold yellow", "?": "bold magenta", "-": "dim"}


class MatrixTable:
    """The success matrix as wide as the console allows: grids x setups, or setups x grids where the setups' columns
    would not fit (rich would shrink every column to nothing and print no cell at all: a 57-setup sweep on a
    200-column terminal showed an empty grid)."""

    def __init__(self, matrix: Matrix, title: str) -> None:
        self.matrix, self.title = matrix, title

    def table(self, transpose: bool) -> Table:
        m = self.matrix
        table = Table(title=self.title)
        table.add_column("setup" if transpose else "grid", style="bold")
        for column in (m.rows if transpose else m.columns):
            table.add_column(Text(column if transpose else f"({one_line(column)})"), justify="center")
        cells = [(f"({one_line(c)})", [m.cell(g, c) for g in m.rows]) for c in m.columns] if transpose else \
            [(g, [m.cell(g, c) for c in m.columns]) for g in m.rows]
        for label, values in cells:
            table.add_row(Text(label), *[Text(v, style=_CELL_STYLE[v]) for v in values])
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = self.table(transpose=False)
        fits = Measurement.get(console, options.update_width(1 << 20), wide).minimum <= options.max_width  # unclamped
        yield wide if fits else self.table(transpose=True)


def matrix_tables(matrix: Matrix, title: str, results: Sequence[ProbeResult] = ()) -> Group:
    legend = Table(title="setups (diff against the first)", show_header=True)
    legend.add_column("setup")
    legend.add_column("env", overflow="fold")
    for name, env in matrix.legend:
        legend.add_row(Text(f"({one_line(name)})"), Text(one_line(env)))
    parts = [MatrixTable(matrix, title), legend]
    if matrix.failures:
        fails = Table(title="failures")
        for col in ("setup", "grid", "class", "rank", "host", "root cause"):
            fails.add_column(col, overflow="fold")
        for f in matrix.failures:
            cells = (f"({f.setup})", f.grid, f.outcome, "" if f.rank is None else str(f.rank), f.host or "", f.line[:300])
            fails.add_row(*(Text(one_line(c)) for c in cells))
        parts.append(fails)
    hosts = host_rows(results)
    if hosts:
        per_host = Table(title="hosts (every rank record, grouped by the host it ran on)")
        for col in HOST_COLUMNS:
            per_host.add_column(col, overflow="fold")
        for row in hosts:
            per_host.add_row(*(Text(one_line(c)) for c in host_cells(row)))
        parts.append(per_host)
    return Group(*parts)


def clip_words(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters, cut at a word boundary with an ellipsis (never mid-word)."""
    text = " ".join(visible(text).split())  # a terminal escape in a root-cause line is shown, not obeyed
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    space = cut.rfind(" ")
    # One long token (a path) has no boundary worth keeping: cut it, still marked.
    return (cut[:space] if space > width // 3 else cut).rstrip(" ,;:") + "…"


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def atom_letter(index: int) -> str:
    """The bisect atom letters of seed 003 (a..z, A..Z, then x52...): the same scheme as BisectReport.labels()."""
    return _LETTERS[index] if index < len(_LETTERS) else f"x{index}"


def atom_label(index: int, atom) -> str:
    """The one way a bisect atom is named on screen and in reports: its letter and its assignment (``b:NCCL_ALGO=Ring``)."""
    return f"{atom_letter(index)}:{atom}"


def probe_line(tag: str, label: str, result, launched: bool = True, width: int = 160) -> str:
    """A bisect/search progress line; results reused from the store say so, so the count of
    "launched" lines equals the probes-launched figure in the report."""
    if result.passed:
        mark = "pass"
    else:
        mark = clip_words(f"{result.outcome}: {(result.root_cause or {}).get('line') or ''}", width)
    return f"[{tag}] {label}: {mark}" + ("" if launched else " (stored, not launched)")


def eta_suffix(progress: Progress) -> str:
    """`` ETA 42s`` for plain progress lines (CI logs get the ETA a terminal shows live)."""
    return f" ETA {_fmt_eta(progress.eta_s())}" if progress.remaining else " done"
