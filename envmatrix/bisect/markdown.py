"""A bisect as markdown (bisect_*.md): seed 003's second table (grids x atom subsets, 1/0), culprits, repairs."""

from __future__ import annotations

from envmatrix.bisect.driver import BisectReport
from envmatrix.env.atoms import Setup
from envmatrix.reporting.console import clip_words
from envmatrix.reporting.text import md_code, md_text


def subset_label(indices: list[int], n: int, labels: dict[int, str]) -> str:
    """Seed 003 style: the atoms kept, or "all-xy" when most are kept."""
    if len(indices) == n:
        return "all"
    if not indices:
        return "none"
    if len(indices) > n / 2:
        return "all-" + "".join(labels[i] for i in range(n) if i not in indices)
    return "".join(labels[i] for i in indices)


def trail_table(report: BisectReport) -> tuple[list[str], list[str]]:
    labels, n = report.labels(), len(report.atoms)
    header = [subset_label(idx, n, labels) for idx, _ in report.trail]
    # 0 = the first failure signature, 0k = signature k (a failure masked by an earlier one), ? = unresolved
    cells = ["1" if o == "pass" else "0" if o == "fail" else ("0" + o[4:]) if o.startswith("fail") else "?" for _, o in report.trail]
    return header, cells


def _split(report: BisectReport) -> str:
    if report.search_probes is None or report.search_probes == report.probes_launched:
        return ""
    return f" ({report.search_probes} to the answer, repaired env included; {report.probes_launched - report.search_probes} in repair)"


def render_markdown(report: BisectReport) -> str:
    labels = report.labels()
    out = [f"# envmatrix bisect: {report.name} on {report.grid}", ""]
    outcome = report.original.get("outcome")
    original = "none (the env passes)" if outcome == "pass" else f"{outcome}: {report.original.get('line')}"
    out.append(
        f"Original failure: {original}  \n"
        f"Probes launched: {report.probes_launched}{_split(report)}; method: {report.method}; "
        f"answer proven complete: {'yes' if report.complete else 'no'}"
    )
    out += ["", "## Atoms", "", "| atom | assignment |", "| --- | --- |"]
    out += [f"| {labels[i]} | {md_code(a)} |" for i, a in enumerate(report.atoms)]
    if report.baseline:
        out += ["", "Baseline (always applied): " + "; ".join(md_code(a, in_table=False) for a in report.baseline)]
    header, cells = trail_table(report)
    out += ["", "## Trail (1 = passes, 0 = fails with signature 1, 0k = fails with signature k, ? = unresolved)", ""]
    out.append("| grid | " + " | ".join(f"({h})" for h in header) + " |")
    out.append("| --- | " + " | ".join("---" for _ in header) + " |")
    out.append(f"| {report.grid} | " + " | ".join(cells) + " |")
    out += ["", "## Culprits", ""]
    for sec in report.sections:
        f = sec["failure"]
        out += [f"### Signature {sec['signature']}: {f.get('outcome')}: {clip_words(f.get('line') or '', 160)}", ""]
        required = sec.get("required") or []
        if required:
            why = sec.get("required_failure") or {}
            out.append(f"- searched with {', '.join(md_code(a, in_table=False) for a in required)} kept: the env without "
                       f"{'it' if len(required) == 1 else 'any of them'} fails another way "
                       f"({why.get('outcome')}: {clip_words(why.get('line') or '', 120)}), which hides this failure; "
                       "each culprit set below fails with them in place")
        for c in sec["culprits"]:
            kind = "interacting: all needed together" if len(c) > 1 else "fails alone"
            out.append(f"- {{{', '.join(md_code(a, in_table=False) for a in c)}}} ({kind})")
        if not sec["culprits"]:
            out.append("- none found")
            if any(other["culprits"] for other in report.sections):
                out.append("- the probes that could show one failed another way (the signatures beside it), which may hide "
                           "it: inconclusive for this failure")
        out.append(f"- proven (fails alone, minimal, env without it no longer fails this way): {'yes' if sec['proven'] else 'no'}; "
                   f"atoms searched: {sec['searched_atoms']}; env without these culprits: {sec['repaired_env_outcome'] or 'not probed'}")
        other = sec["repaired_env_outcome"] or ""
        if sec["culprits"] and not sec["proven"] and other.startswith("fail") and other != "fail":
            out.append(f"- each set above fails alone and is minimal, but the env without them fails with signature {other[4:]}, "
                       f"which cannot be ordered against this one and may hide more culprits of signature {sec['signature']}")
        out.append("")
    if not report.sections:
        out.append("- none found")
    if report.status == "baseline fails":
        out.append("\nThe env without any of these variables fails too (the baseline probe): no variable of it explains the "
                   "failure; inconclusive.")
    if report.status == "env flaky":
        runs = [o for idx, o in report.trail if len(idx) == len(report.atoms)]
        out.append(f"\nThe env failed in {sum(o != 'pass' for o in runs)} of its {len(runs)} runs and passed in the others: "
                   "flaky, so no culprit can be proven; inconclusive. Sweep it a few times, or bisect with more --repeats.")
    if report.status == "budget":
        out.append("Probe cap reached: inconclusive; only the culprits above are proven. Not cleared (most suspect first): "
                   + (", ".join(md_code(a, in_table=False) for a in report.suspects) or "none"))
    if report.free_probes:
        out.append(f"Stored results used as free probes (not launched): {report.free_probes}")
    if report.repairs:
        out += ["", "## Repair", "", "| variable | value | outcome | busbw (GB/s) | root cause |", "| --- | --- | --- | --- | --- |"]
        for r in report.repairs:
            busbw = "-" if r.busbw is None else f"{r.busbw:.2f}"
            out.append(f"| {md_text(r.var)} | {'(unset)' if r.value is None else md_text(r.value)} | {r.outcome} | {busbw} | "
                       f"{md_text(clip_words(r.root_cause or '', 160))} |")
    if report.recommended or report.culprits:
        proof = "proven: this env passed a probe" if report.recommended_proven else "NOT proven: no repaired env passed a probe"
        out += ["", "## Recommended env", "", f"({proof})"]
    if report.recommended:
        out += ["", "```bash", *Setup("recommended", tuple(report.recommended)).shell_lines(), "```"]
    return "\n".join(out) + "\n"
