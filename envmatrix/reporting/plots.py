"""matplotlib figures as inline SVG text: nothing to fetch when the report is opened offline."""

from __future__ import annotations

import hashlib
import io
import re
import textwrap
from typing import Sequence

from envmatrix.reporting.html_model import Curve, MatrixModel, SearchModel, best_so_far, measured_trials
from envmatrix.reporting.text import one_line, visible
from envmatrix.results import PASS

# One colour per outcome class, so the same failure looks the same in every plot.
OUTCOME_COLORS = {
    PASS: "#2e9e44",
    "init_error": "#d62728",
    "collective_error": "#e8590c",
    "wrong_result": "#9c36b5",
    "timeout": "#f59f00",
    "crash": "#862e9c",
    "launch_error": "#5c2d91",
    "launcher_error": "#862e9c",
    "exit_error": "#c92a2a",
    "unresolved": "#868e96",
    "env_mismatch": "#1864ab",
    "wrong_transport": "#0b7285",
    "slow": "#fab005",
    "fail": "#d62728",
}
NOT_RUN = "#e9ecef"


def load_pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Text stays text (small files, selectable) and ids are stable across runs (diffable example files). Labels are
    # setup names and env atoms ('PATH=$HOME/bin:$PATH'): '$' is a character, never the start of mathtext.
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "envmatrix", "font.size": 9, "text.parse_math": False})
    return plt


_SVG_ID = re.compile(r'(\bid="|\bhref="#|url\(#)([^"()]+)')


def _svg(fig) -> str:
    plt = load_pyplot()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE: the SVG goes inline into HTML
    # every matplotlib figure names its parts figure_1, axes_1, ...: inline on one page those ids would repeat (invalid
    # HTML, and a reference could resolve to another figure's element); a prefix from the figure's own text keeps
    # them unique and the same from run to run
    prefix = "f" + hashlib.sha1(text.encode()).hexdigest()[:8] + "-"
    return _SVG_ID.sub(lambda m: m.group(1) + prefix + m.group(2), text)


def outcome_color(outcome: str) -> str:
    return OUTCOME_COLORS.get(outcome, "#c92a2a")


def matrix_heatmap(model: MatrixModel) -> str:
    """Grids x setups (seed 003's layout); each cell: outcome, transport, and the start of the root-cause line.

    Many setups on few grids (a search store) would make a strip too thin to read, so then setups become rows.
    Plain SVG, no matplotlib: the one figure every sweep's report draws, so a sweep without bench rows never
    imports matplotlib (~1-2 s of CPU on the shared 2-core box, benchmarks/throughput.md).
    """
    transpose = len(model.setups) > 12 and len(model.setups) > len(model.grids)
    rows = [f"({s})" for s in model.setups] if transpose else list(model.grids)
    cols = list(model.grids) if transpose else [f"({s})" for s in model.setups]

    def cell_at(i: int, j: int):
        return model.cells.get((model.grids[j], model.setups[i]) if transpose else (model.grids[i], model.setups[j]))

    cell_w, cell_h = 118, (48 if transpose else 74)
    left = 14 + 7 * max((len(r) for r in rows), default=4) + 22  # row labels, then the axis title
    top, bottom = 8, 52
    width, height = left + cell_w * len(cols) + 8, top + cell_h * len(rows) + bottom
    grid_label, setup_label = "grid (nodes x ranks per node)", "setup"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           'font-family="DejaVu Sans, sans-serif" font-size="9">']
    for i, row in enumerate(rows):
        y = top + i * cell_h
        out.append(f'<text x="{left - 6}" y="{y + cell_h / 2 + 3}" text-anchor="end">{_xml(row)}</text>')
        for j in range(len(cols)):
            x = left + j * cell_w
            cell = cell_at(i, j)
            fill = NOT_RUN if cell is None else outcome_color(cell.outcome)
            ink = "black" if cell is None or cell.outcome == "slow" else "white"
            out.append(f'<rect x="{x}" y="{y}" width="{cell_w - 2}" height="{cell_h - 2}" fill="{fill}"/>')
            lines = ["not run"] if cell is None else [cell.outcome]
            if cell is not None and cell.transport:
                lines.append(cell.transport)
            if cell is not None and cell.line:
                lines += textwrap.wrap(cell.line, 20)[: 1 if transpose else 2]
            first = y + (cell_h - 2) / 2 - (len(lines) - 1) * 5.5 + 3
            for k, line in enumerate(lines):
                out.append(f'<text x="{x + (cell_w - 2) / 2}" y="{first + 11 * k:.1f}" text-anchor="middle" '
                           f'font-size="7" fill="{ink}">{_xml(line)}</text>')
    for j, col in enumerate(cols):
        out.append(f'<text x="{left + j * cell_w + (cell_w - 2) / 2}" y="{top + len(rows) * cell_h + 14}" '
                   f'text-anchor="middle">{_xml(col)}</text>')
    out.append(f'<text x="{left + len(cols) * cell_w / 2}" y="{height - 10}" text-anchor="middle">'
               f'{grid_label if transpose else setup_label}</text>')
    mid = top + len(rows) * cell_h / 2
    out.append(f'<text x="12" y="{mid}" text-anchor="middle" transform="rotate(-90 12 {mid})">'
               f'{setup_label if transpose else grid_label}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _xml(text: str) -> str:
    from xml.sax.saxutils import escape

    return escape(visible(text))


def _size_label(n: float) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g}{unit}"
    return f"{n:g}"


def _positive(xs: Sequence[int], ys: Sequence[float]) -> tuple[list[int], list[float]]:
    pairs = [(x, y) for x, y in zip(xs, ys) if y > 0]
    return [x for x, _ in pairs], [y for _, y in pairs]


def size_curves(collective: str, curves: Sequence[Curve]) -> str:
    """busbw and time vs message size on log axes, like nccl-tests users plot them."""
    plt = load_pyplot()
    from matplotlib.ticker import FuncFormatter

    fig, (bw, tm) = plt.subplots(1, 2, figsize=(10, 3.6))
    plotted = {bw: 0, tm: 0}
    for c in curves:
        marker = "o" if len(c.sizes) < 24 else None
        label = visible(c.label) + (f"  #wrong {c.wrong}" if c.wrong else "")
        # log axes: a zero (unmeasured or too small to time) would be dropped with a warning, so leave it out
        for ax, ys in ((bw, c.busbw), (tm, c.time_us)):
            xs, ys = _positive(c.sizes, ys)
            ax.plot(xs, ys, marker=marker, markersize=3, label=label)
            plotted[ax] += len(xs)
    for ax, ylabel in ((bw, "busbw (GB/s)"), (tm, "time (us)")):
        ax.set_xscale("log", base=2)
        if not plotted[ax]:  # e.g. busbw of a one-rank grid is 0 by definition: a log axis cannot hold it
            ax.text(0.5, 0.5, "all values are 0 (one rank: nothing crosses a link)" if ax is bw else "no values",
                    transform=ax.transAxes, ha="center", va="center", fontsize=8)
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel(ylabel)
            continue
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _size_label(v)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # 320, not 3.2x10^2
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if str(f"{v:g}")[0] in "25" else ""))
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
    bw.set_title(f"{collective}: busbw")
    tm.set_title(f"{collective}: time")
    if len(curves) > 8:  # a long legend would hide the curves: put it beside the pair
        tm.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0), ncols=1 + len(curves) // 24)
    else:
        bw.legend(fontsize=7, loc="best")
    return _svg(fig)


def bisect_trail(report: dict) -> str:
    """Atoms (rows) x probes in order (columns): a filled square = atom applied, colour = probe outcome."""
    plt = load_pyplot()

    atoms = report["atoms"]  # letter -> atom text
    letters = list(atoms)
    trail = report.get("trail") or []
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * len(trail) + 3.5), max(1.8, 0.3 * (len(letters) + 1) + 1.0)))
    culprit_atoms = {a for group in report.get("culprits") or [] for a in group}
    for x, step in enumerate(trail):
        used = "" if step.get("atoms") in (None, "-") else step["atoms"]
        color = outcome_color(PASS if step.get("outcome") == "pass" else "fail")
        for y, letter in enumerate(letters):
            if letter in used:
                ax.add_patch(plt.Rectangle((x - 0.4, y - 0.4), 0.8, 0.8, color=color))
        # the last row is every probe's verdict, so the empty-env probe shows too
        ax.add_patch(plt.Circle((x, len(letters) + 0.1), 0.3, color=color))
    ax.axhline(len(letters) - 0.4, color="#adb5bd", linewidth=0.8)
    ax.set_xlim(-0.6, max(len(trail), 1) - 0.4)
    ax.set_ylim(len(letters) + 0.6, -0.5)
    ax.set_aspect("auto")
    ax.set_xticks(range(len(trail)), [str(i + 1) for i in range(len(trail))])
    labels = [one_line(f"{l}: {atoms[l]}")[:48] + ("  <- culprit" if atoms[l] in culprit_atoms else "") for l in letters]
    ax.set_yticks(range(len(letters) + 1), [*labels, "probe outcome"])
    ax.set_xlabel("probe (in launch order); green = passed, red = failed")
    ax.set_title(f"bisect {report.get('name')} on {report.get('grid')}")
    return _svg(fig)


def search_history(model: SearchModel) -> str:
    plt = load_pyplot()

    fig, ax = plt.subplots(figsize=(7, 3.4))
    done = measured_trials(model.trials)
    failed = [t for t in model.trials if t.failure]
    ax.scatter([t.number for t in done], [t.value for t in done], s=16, color="#1c7ed6", label="trial")
    best = best_so_far(model.trials, model.direction)
    if best:
        ax.step([b[0] for b in best], [b[1] for b in best], where="post", color="#e8590c", label="best so far")
    if failed:
        low = min((t.value for t in done), default=0.0)
        ax.scatter([t.number for t in failed], [low] * len(failed), marker="x", color="#d62728", label="failed")
    ax.set_xlabel("trial")
    ax.set_ylabel(f"{model.objective} ({model.direction})")
    ax.set_title(f"search {model.name}: history")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return _svg(fig)


def search_importances(model: SearchModel) -> str:
    plt = load_pyplot()

    items = list(reversed(model.importances))
    fig, ax = plt.subplots(figsize=(6, max(1.6, 0.35 * len(items) + 0.8)))
    ax.barh([k for k, _ in items], [v for _, v in items], color="#1c7ed6")
    ax.set_xlabel(f"fANOVA importance for {model.objective}")
    ax.set_title("parameter importances")
    return _svg(fig)


def search_parallel(model: SearchModel) -> str:
    """One polyline per completed trial across the parameter axes (categorical levels) and the objective."""
    plt = load_pyplot()
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    done = measured_trials(model.trials)
    params = model.params
    levels = {p: sorted({str(t.params.get(p)) for t in done}) for p in params}
    values = [t.value for t in done]
    lo, hi = min(values), max(values)
    norm = Normalize(lo, hi if hi > lo else lo + 1)
    cmap = colormaps["viridis"] if model.direction == "maximize" else colormaps["viridis_r"]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.8 * (len(params) + 1)), 3.6))

    def ypos(p: str, t) -> float:
        lv = levels[p]
        return lv.index(str(t.params.get(p))) / max(len(lv) - 1, 1)

    for t in sorted(done, key=lambda t: t.value if model.direction == "maximize" else -t.value):
        ys = [ypos(p, t) for p in params] + [norm(t.value)]
        ax.plot(range(len(ys)), ys, color=cmap(norm(t.value)), alpha=0.8, linewidth=1.2)
    for x, p in enumerate(params):
        ax.axvline(x, color="#495057", linewidth=0.8)
        for k, level in enumerate(levels[p]):
            ax.text(x + 0.03, k / max(len(levels[p]) - 1, 1), "unset" if level == "None" else level, fontsize=7, va="center")
    ax.axvline(len(params), color="#495057", linewidth=0.8)
    ax.text(len(params) + 0.03, 0, f"{lo:.3g}", fontsize=7)
    ax.text(len(params) + 0.03, 1, f"{hi:.3g}", fontsize=7)
    ax.set_xticks(range(len(params) + 1), [p.replace("NCCL_", "") for p in params] + [model.objective], rotation=15)
    ax.set_yticks([])
    ax.set_xlim(-0.2, len(params) + 0.6)
    ax.set_title("parallel coordinates (colour = objective)")
    return _svg(fig)


def conditions_plot(block) -> str:
    """Time per synchronisation vs network condition for one pattern (a reporting.conditions_tables.PatternBlock):
    one line per column (size, nodes, backend), min-max as error bars, the floor S/R dashed, flagged cells ringed."""
    plt = load_pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.4))
    xs = list(range(len(block.conditions)))
    for column, label in zip(block.columns, block.labels):
        cells = [block.cell(name, column) for name, _ in block.conditions]
        points = [(x, c) for x, c in zip(xs, cells) if c is not None]
        if not points:
            continue
        px = [x for x, _ in points]
        py = [c.median_s for _, c in points]
        err = [[c.median_s - c.min_s for _, c in points], [c.max_s - c.median_s for _, c in points]]
        line = ax.errorbar(px, py, yerr=err, marker="o", markersize=4, capsize=3, label=label)
        color = line[0].get_color()
        floors = [(x, c.check.bound_s) for x, c in points if c.check.bound_s is not None]
        if floors:
            ax.plot([x for x, _ in floors], [b for _, b in floors], linestyle="none", marker="_", markersize=14,
                    color=color, alpha=0.7)
        flagged = [(x, c) for x, c in points if c.check.flagged]
        for x, c in flagged:
            ax.plot([x], [c.median_s], marker="o", markersize=11, markerfacecolor="none",
                    markeredgecolor="#d62728" if c.check.verdict == "shaping not in effect" else "#f59f00")
    ax.set_xticks(xs, [name for name, _ in block.conditions], rotation=15)
    ax.set_yscale("log")
    ax.set_ylabel("time per sync (s)")
    ax.set_title(f"{block.pattern}: time vs network condition (bars: min-max; dash: floor S/R; "
                 "ring: flagged)", fontsize=8)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _svg(fig)
