"""Bisect one failing env on one grid: the search over atoms, real probes, repair."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from envmatrix.bisect.peel import find_all_culprits, same_failure
from envmatrix.bisect.certificates import EXPLAIN, STRICT
from envmatrix.bisect.probe_cache import PASS
from envmatrix.bisect.signature import signature
from envmatrix.env.atoms import SET, Atom, Setup
from envmatrix.planning.grid import Grid
from envmatrix.results import ProbeResult


@dataclass
class ProbeContext:
    """How to run one probe: everything but the env (the engine session carries store, launcher, probe, pins)."""

    session: Any  # engine.Session, its sweep_id naming this bisect
    grid: Grid
    rerun: bool = False


@dataclass
class RepairRow:
    var: str
    value: Optional[str]  # None: unset
    outcome: str
    busbw: Optional[float]
    root_cause: Optional[str]


@dataclass
class BisectReport:
    name: str
    grid: str
    atoms: list[Atom]
    baseline: list[Atom]
    culprits: list[list[Atom]]
    probes_launched: int
    trail: list[tuple[list[int], str]]  # atom indices of each probe, settled outcome
    complete: bool
    method: str
    original: dict[str, Any]
    repairs: list[RepairRow] = field(default_factory=list)
    recommended: list[Atom] = field(default_factory=list)
    unresolved: list[list[int]] = field(default_factory=list)
    # probes up to the search's answer: baseline, the failing env, the search and the repaired-env check
    search_probes: Optional[int] = None
    sections: list[dict[str, Any]] = field(default_factory=list)  # one per failure signature, in peeling order
    status: str = "ok"  # ok | env passes | env flaky | baseline fails | budget | incomplete
    suspects: list[str] = field(default_factory=list)  # atoms still suspect when the search stopped early
    free_probes: int = 0  # stored results used as known outcomes (not launched)
    recommended_proven: bool = False  # the recommended env passed a probe

    def labels(self) -> dict[int, str]:
        from envmatrix.reporting.console import atom_letter

        return {i: atom_letter(i) for i in range(len(self.atoms))}

    def to_json(self) -> dict[str, Any]:
        labels = self.labels()
        return {
            "name": self.name,
            "grid": self.grid,
            "atoms": {labels[i]: str(a) for i, a in enumerate(self.atoms)},
            "baseline": [str(a) for a in self.baseline],
            "culprits": [[str(a) for a in c] for c in self.culprits],
            "probes_launched": self.probes_launched,
            "search_probes": self.search_probes,
            "complete": self.complete,
            "method": self.method,
            "original_failure": self.original,
            "trail": [{"atoms": "".join(labels[i] for i in idx) or "-", "outcome": o} for idx, o in self.trail],
            "unresolved": ["".join(labels[i] for i in idx) for idx in self.unresolved],
            "repairs": [dataclasses.asdict(r) for r in self.repairs],
            "recommended_env": [str(a) for a in self.recommended],
            # what a shell sources, as the Markdown report prints it (path prepends last entry first)
            "recommended_shell": Setup("recommended", tuple(self.recommended)).shell_lines(),
            "recommended_proven": self.recommended_proven,
            "signatures": self.sections,
            "status": self.status,
            "suspects": self.suspects,
            "free_probes": self.free_probes,
        }


def run_env(ctx: ProbeContext, name: str, atoms: Sequence[Atom], rerun: bool = False) -> tuple[ProbeResult, bool]:
    """One probe of ``atoms`` on the grid; reuses a stored result of the same run key unless rerun.
    Returns (result, launched)."""
    from envmatrix.engine import run_trial

    setup = Setup(name, tuple(atoms), origin="bisect")
    trial = run_trial(ctx.session, setup, ctx.grid, reuse=not (ctx.rerun or rerun))
    return trial.result, trial.launched


def subset_atoms(baseline: Sequence[Atom], atoms: Sequence[Atom], chosen: frozenset) -> list[Atom]:
    """The baseline plus the chosen atoms (later assignments of a variable win in materialize)."""
    return list(baseline) + [a for i, a in enumerate(atoms) if i in chosen]


def _subset_name(chosen: frozenset, n: int) -> str:
    return "bisect-" + "".join("1" if i in chosen else "0" for i in range(n))


def result_signature(result: ProbeResult):
    """A probe's signature for the peeling search: "pass", "unresolved" (skip, launch error) or (outcome, line)."""
    if result.passed:
        return PASS
    if result.outcome in ("unresolved", "launch_error"):
        return "unresolved"
    return signature(result)


def stored_probes(results: Sequence[ProbeResult], baseline: Sequence[Atom], atoms: Sequence[Atom]) -> dict[frozenset, ProbeResult]:
    """Stored results (e.g. the other setups of a sweep on this grid) whose env is baseline + some of ``atoms``,
    by atom subset: free probes for the search (the failing env's own result among them, with --failing)."""
    index = {str(a): i for i, a in enumerate(atoms)}
    base = {str(a) for a in baseline}
    known: dict[frozenset, ProbeResult] = {}
    for r in results:
        names = [str(Atom.from_json(a)) for a in (r.setup or {}).get("atoms", [])]
        if not base <= set(names) or any(n not in index and n not in base for n in names):
            continue
        known[frozenset(index[n] for n in names if n in index)] = r
    return known


def bisect_env(
    ctx: ProbeContext,
    name: str,
    atoms: Sequence[Atom],
    baseline: Sequence[Atom] = (),
    repeats: int = 1,
    repair: bool = True,
    catalog: Any = None,
    on_probe: Optional[Callable[..., None]] = None,
    max_probes: Optional[int] = None,
    stored: Sequence[ProbeResult] = (),
) -> BisectReport:
    atoms = [a for a in atoms if a not in set(baseline)]
    n = len(atoms)
    launched = 0
    results: dict[frozenset, list[ProbeResult]] = {}  # every run of each set, in order (flaky repeats too)
    seen: set[frozenset] = set()

    def oracle(chosen: frozenset):
        nonlocal launched
        # A set asked for again is a repeat of a flaky probe: run it for real.
        result, fresh = run_env(ctx, _subset_name(chosen, n), subset_atoms(baseline, atoms, chosen), rerun=chosen in seen)
        seen.add(chosen)
        launched += fresh
        results.setdefault(chosen, []).append(result)
        if on_probe:
            on_probe(_subset_name(chosen, n), result, fresh)
        return result_signature(result)

    free = stored_probes(stored, baseline, atoms)
    # The search asks again for a set it was given only for one more run (--repeats): the stored result is a vote
    # already, handing it back would count it twice (a sweep's one failing run of a flaky env counted as two).
    seen.update(free)
    known = {chosen: result_signature(r) for chosen, r in free.items()}
    # With repair on, each search certifies "explain" and the strict checks follow (each culprit atom unset in
    # the env: the repair's first probes anyway); flaky probes or no repair: each search certifies strict itself.
    certify = EXPLAIN if repair and repeats == 1 else STRICT
    peel = find_all_culprits(n, oracle, known=known, max_probes=max_probes, repeats=repeats, certify=certify, strict_after=repair)
    sigs: list[Any] = [s.signature for s in peel.sections]
    for chosen, stored_result in free.items():  # a stored result names the failure as well as a launched one
        results.setdefault(chosen, []).insert(0, stored_result)
    runs = [r for rs in results.values() for r in rs]
    full_runs = results.get(frozenset(range(n)), [])
    # The original failure is the env's settled one (signature 1), not its first run: with --repeats a flaky env's
    # first run may have passed.
    full_result = next((r for r in full_runs if sigs and result_signature(r) == sigs[0]), None) \
        or next((r for r in full_runs if not r.passed), None) or next(iter(full_runs), None)
    if not sigs and full_result is not None and isinstance(result_signature(full_result), tuple):
        # no section (the baseline fails too, or the cap came first): the trail still marks the env's own failure
        sigs.append(result_signature(full_result))

    def code(sig: Any) -> str:
        if sig == PASS:
            return PASS
        k = next((k for k, s in enumerate(sigs) if same_failure(sig, s)), None)
        if k is not None:
            return "fail" if k == 0 else f"fail{k + 1}"
        return "unresolved"

    sections = []
    for k, sec in enumerate(peel.sections):
        line = next((r for r in runs if result_signature(r) == sec.signature), None)
        sections.append({
            "signature": k + 1,
            "failure": _failure(line) if line is not None else {"outcome": sec.signature[0], "line": sec.signature[1], "rank": None},
            "culprits": [[str(atoms[i]) for i in sorted(c)] for c in sec.culprits],
            "proven": sec.complete,
            "searched_atoms": len(sec.universe),
            "repaired_env_outcome": None if sec.repaired_sig is None else code(sec.repaired_sig),
            # atoms kept in every probe of this search: the env without any of them fails with required_failure
            "required": [str(atoms[i]) for i in sec.required],
            "required_failure": _signature_failure(runs, sec.required_sig),
        })
    report = BisectReport(
        name=name,
        grid=ctx.grid.label,
        atoms=list(atoms),
        baseline=list(baseline),
        culprits=[[atoms[i] for i in sorted(c)] for c in peel.culprits],
        probes_launched=launched,
        # the free probes first (the failing env leads), then what was launched
        trail=[(sorted(a), code(known[a])) for a in sorted(known, key=len, reverse=True)] + [(sorted(a), code(sig)) for a, sig in peel.trail],
        complete=peel.complete,
        method=peel.status if peel.status != "ok" else "peeling" if len(sections) > 1 else "model",
        original=_failure(full_result) if full_result is not None else {"outcome": None, "line": None, "rank": None},
        search_probes=launched,
        sections=sections,
        status=peel.status,
        suspects=[str(atoms[i]) for i in peel.suspects],
        free_probes=len(known),
    )
    if peel.final_env is not None:
        report.recommended = subset_atoms(baseline, atoms, frozenset(peel.final_env))
        report.recommended_proven = True
    if repair and report.culprits and peel.final_env is not None and repeats == 1:

        def probe_env(label: str, env: Sequence[Atom]) -> ProbeResult:
            nonlocal launched
            result, fresh = run_env(ctx, label, env)
            launched += fresh
            if on_probe:
                on_probe(label, result, fresh)
            return result

        _repair(ctx, report, catalog, probe_env)
    report.probes_launched = launched
    return report


def _signature_failure(runs: Sequence[ProbeResult], sig: Any) -> Optional[dict[str, Any]]:
    """The failure of the first run with signature ``sig`` (None when there is none)."""
    run = next((r for r in runs if sig is not None and result_signature(r) == sig), None)
    return None if run is None else _failure(run)


def _failure(result: ProbeResult) -> dict[str, Any]:
    return {"outcome": result.outcome, "line": (result.root_cause or {}).get("line"), "rank": (result.root_cause or {}).get("rank")}


def _busbw(result: ProbeResult) -> Optional[float]:
    values = [m["busbw_gbps"] for m in result.metrics if m.get("busbw_gbps") is not None]
    return max(values) if values else None


def _repair(ctx: ProbeContext, report: BisectReport, catalog: Any, probe_env: Callable) -> None:
    """Try every other catalogued value (and unset) of each culprit variable; recommend the best that passes.
    Each change is probed with the other culprit sets removed: with one of them still set every row would fail."""
    full = report.baseline + report.atoms
    best_changes: dict[str, tuple[Optional[str], Optional[float]]] = {}
    for culprit in report.culprits:
        others = {a for other in report.culprits if other is not culprit for a in other if a not in culprit}
        for atom in culprit:
            choices: list[Optional[str]] = [None]
            if atom.op == SET and catalog is not None and atom.var in catalog:
                try:
                    choices += [v for v in catalog.values(atom.var) if catalog.canonical(atom.var, v) != catalog.canonical(atom.var, atom.value)]
                except Exception:  # noqa: BLE001 - free-text domains have no value list: unset only
                    pass
            for value in choices:
                env = [a for a in full if a != atom and a not in others] + ([] if value is None else [Atom(atom.var, SET, value)])
                label = f"repair-{atom.var}={'unset' if value is None else value}"
                result = probe_env(label, env)
                report.repairs.append(RepairRow(atom.var if atom.op == SET else str(atom), value, result.outcome, _busbw(result), (result.root_cause or {}).get("line")))
                if result.passed:
                    prev = best_changes.get(str(atom))
                    score = _busbw(result)
                    if prev is None or (score or -1) > (prev[1] or -1):
                        best_changes[str(atom)] = (value, score)
    recommended = list(full)
    for culprit in report.culprits:
        changed = [a for a in culprit if str(a) in best_changes]
        if not changed:  # no single change passed alone (a masked culprit): unset the set, as peeling did
            recommended = [a for a in recommended if a not in culprit]
            continue
        atom = changed[0]  # one change per culprit set repairs it
        value, _ = best_changes[str(atom)]
        recommended = [a for a in recommended if a != atom] + ([] if value is None else [Atom(atom.var, SET, value)])
    if [str(a) for a in recommended] == [str(a) for a in report.recommended]:
        return
    # the combination of the best changes is a new env: recommended only once a probe proves it passes
    if probe_env("repair-combined", recommended).passed:
        report.recommended = recommended
