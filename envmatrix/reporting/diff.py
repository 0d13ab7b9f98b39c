"""``envmatrix diff``'s text: a :class:`judgement.regressions.RunDiff` as the lines a terminal shows (pure)."""

from __future__ import annotations

import os

from envmatrix.judgement.regressions import RunDiff
from envmatrix.reporting.text import one_line


def diff_text(d: RunDiff, run_a: str, run_b: str) -> str:
    """The summary line, each regression, fix, changed failure and unmatched cell, then the verdict."""
    lines = [f"diff {os.path.basename(os.path.abspath(run_a))} -> {os.path.basename(os.path.abspath(run_b))}: "
             f"{len(d.broke)} pass->fail, {len(d.fixed)} fail->pass, {len(d.slower)} busbw drops > {d.threshold_pct:g}% "
             f"({d.compared_points} (collective, size) points compared)"]
    for f in d.broke:
        lines.append(f"  REGRESSION ({f.setup}) {f.grid} [{f.backend}]: pass -> {f.after}: {f.line}")
    for c in d.slower:
        lines.append(f"  REGRESSION ({c.setup}) {c.grid} [{c.backend}] {c.collective} {c.size_bytes} B: busbw "
                     f"{c.before_gbps:.3g} -> {c.after_gbps:.3g} GB/s ({c.change_pct:+.1f}%)")
    for f in d.fixed:
        lines.append(f"  fixed ({f.setup}) {f.grid} [{f.backend}]: {f.before} -> pass (was: {f.line})")
    for f in d.changed_failure:
        lines.append(f"  still failing ({f.setup}) {f.grid} [{f.backend}]: {f.before} -> {f.after}: {f.line}")
    for label, keys in (("only in A", d.only_a), ("only in B", d.only_b), ("untested in B (exit 125)", d.untested)):
        if keys:
            lines.append(f"  {label}: " + ", ".join(f"({s}) {g} [{b}]" for s, g, b in keys))
    if d.unmeasured:
        lines.append("  busbw of A not measured in B: " + ", ".join(f"({s}) {g} [{b}] {c} {n} B" for s, g, b, c, n in d.unmeasured))
    lines.append("verdict: " + _verdict(d))
    # names and root-cause lines are the runs' own: a terminal escape or a newline in them is shown, not obeyed
    return "\n".join(one_line(line) for line in lines)


def _verdict(d: RunDiff) -> str:
    if d.regressed:
        return "REGRESSED"
    if not d.inconclusive:
        return "no regression"
    if d.compared_cells == 0 and not d.untested:
        return "INCONCLUSIVE: no cell (setup, grid, backend) is in both runs"
    why = ([f"{len(d.only_a)} of run A's are not in run B"] if d.only_a else []) + \
        ([f"run B could not test {len(d.untested)} (unresolved)"] if d.untested else []) + \
        ([f"run B did not measure {len(d.unmeasured)} of run A's busbw points"] if d.unmeasured else [])
    return f"INCONCLUSIVE: no regression in the {d.compared_cells} cells compared, but {' and '.join(why)}"
