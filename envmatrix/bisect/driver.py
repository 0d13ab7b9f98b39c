"""Bisect one failing env on one grid: the search over atoms, real probes, repair."""

from __future__ import annotations

import dataclasses
import os
import string
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from envmatrix.bisect.search import EXPLAIN, FAIL, PASS, STRICT, Probes, SearchResult, certificate_tests, find_culprits
from envmatrix.bisect.signature import classify, signature
from envmatrix.env.atoms import SET, Atom, Setup
from envmatrix.planning.grid import Grid
from envmatrix.planning.plan import ProbeSpec, plan_runs
from envmatrix.results import ProbeResult


@dataclass
class ProbeContext:
    """How to run one probe: everything but the env."""

    grid: Grid
    probe: ProbeSpec
    backend: str
    launcher: str
    run_dir: str
    inherited_env: Mapping[str, str]
    pins: Mapping[str, str]
    gpus: int
    store: Any  # ResultStore
    sweep_id: str
    rerun: bool = False
    launcher_impl: Any = None  # a configured Launcher; None: the registry's default for ``launcher``


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

    def labels(self) -> dict[int, str]:
        letters = string.ascii_lowercase + string.ascii_uppercase
        return {i: (letters[i] if i < len(letters) else f"x{i}") for i in range(len(self.atoms))}

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
        }


def run_env(ctx: ProbeContext, name: str, atoms: Sequence[Atom], rerun: bool = False) -> tuple[ProbeResult, bool]:
    """One probe of ``atoms`` on the grid; reuses a stored result unless rerun. Returns (result, launched)."""
    from envmatrix.execution.runner import execute
    from envmatrix.launchers import get_launcher
    from envmatrix.probes import get_probe

    setup = Setup(name, tuple(atoms), origin="bisect")
    (run,) = plan_runs([setup], [ctx.grid], ctx.probe, ctx.backend, ctx.launcher)
    # The key hashes the setup name too: look for the same env under any name first.
    if not (ctx.rerun or rerun):
        for stored in ctx.store.latest(run_keys=[run.key]):
            return stored, False
    workdir = os.path.join(ctx.run_dir, "logs", f"{ctx.grid.label}_{run.key}", f"{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**9:09d}")
    launcher = ctx.launcher_impl or get_launcher(ctx.launcher)
    result = execute(run, launcher, get_probe(ctx.probe.name), workdir, ctx.inherited_env, ctx.pins, ctx.gpus)
    result.sweep_id = ctx.sweep_id
    ctx.store.put(result)
    return result, True


def subset_atoms(baseline: Sequence[Atom], atoms: Sequence[Atom], chosen: frozenset) -> list[Atom]:
    """The baseline plus the chosen atoms (later assignments of a variable win in materialize)."""
    return list(baseline) + [a for i, a in enumerate(atoms) if i in chosen]


def _subset_name(chosen: frozenset, n: int) -> str:
    return "bisect-" + "".join("1" if i in chosen else "0" for i in range(n))


def bisect_env(
    ctx: ProbeContext,
    name: str,
    atoms: Sequence[Atom],
    baseline: Sequence[Atom] = (),
    repeats: int = 1,
    repair: bool = True,
    catalog: Any = None,
    on_probe: Optional[Callable[[str, ProbeResult], None]] = None,
) -> BisectReport:
    atoms = [a for a in atoms if a not in set(baseline)]
    n = len(atoms)
    launched = 0
    state: dict[str, Any] = {"original": None}
    known: dict[frozenset, str] = {}

    seen: set[frozenset] = set()

    def probe(chosen: frozenset) -> ProbeResult:
        nonlocal launched
        # A set asked for again is a repeat of a flaky probe: run it for real.
        result, fresh = run_env(ctx, _subset_name(chosen, n), subset_atoms(baseline, atoms, chosen), rerun=chosen in seen)
        seen.add(chosen)
        launched += fresh
        if on_probe:
            on_probe(_subset_name(chosen, n), result)
        return result

    # The failure being bisected: its class and root-cause line define "the same failure".
    full = probe(frozenset(range(n)))
    state["original"] = signature(full)
    if full.passed:
        return BisectReport(name, ctx.grid.label, list(atoms), list(baseline), [], launched, [(list(range(n)), PASS)], False, "env passes", _failure(full))
    known[frozenset(range(n))] = FAIL
    base = probe(frozenset())
    known[frozenset()] = classify(base, state["original"])

    def oracle(chosen: frozenset) -> str:
        return classify(probe(chosen), state["original"])

    # With repair on, the search certifies "explain" (each set fails alone, is minimal, and the env without
    # all of them passes) and the per-atom checks of "strict" come from the repair's unset probes, run first
    # here; flaky probes or no repair: the search certifies strict itself.
    certify = EXPLAIN if repair and repeats == 1 else STRICT
    result: SearchResult = find_culprits(n, oracle, repeats=repeats, known=known, certify=certify)
    search_probes = launched
    if certify == EXPLAIN and result.complete:
        result = _complete_strictly(n, oracle, known, result)
    report = BisectReport(
        name=name,
        grid=ctx.grid.label,
        atoms=list(atoms),
        baseline=list(baseline),
        culprits=[[atoms[i] for i in sorted(c)] for c in result.culprits],
        probes_launched=launched,
        trail=[([], known[frozenset()]), (list(range(n)), FAIL)] + [(sorted(a), o) for a, o in result.trail],
        complete=result.complete,
        method=result.method,
        original=_failure(full),
        unresolved=[sorted(u) for u in result.unresolved],
        search_probes=search_probes,
    )
    if repair and report.culprits:

        def probe_env(label: str, env: Sequence[Atom]) -> ProbeResult:
            nonlocal launched
            result, fresh = run_env(ctx, label, env)
            launched += fresh
            if on_probe:
                on_probe(label, result)
            return result

        _repair(ctx, report, catalog, probe_env)
    report.probes_launched = launched
    return report


def _complete_strictly(n: int, oracle: Callable[[frozenset], str], known: Mapping[frozenset, str], found: SearchResult) -> SearchResult:
    """Run the strict checks an explain-level answer lacks (each culprit atom unset in the full env: the
    repair's first probe of it); when one still fails, search on from every outcome seen (strict)."""
    universe = frozenset(range(n))
    probes = Probes(n, oracle, 1, known={**known, **dict(found.trail)})
    if all(probes.settle(atoms) == expected for atoms, expected in certificate_tests(universe, found.culprits, STRICT)):
        return dataclasses.replace(found, trail=found.trail + probes.trail, probes=found.probes + probes.launched)
    more = find_culprits(n, oracle, known=probes.cache, certify=STRICT)
    return dataclasses.replace(more, trail=found.trail + probes.trail + more.trail, probes=found.probes + probes.launched + more.probes)


def _failure(result: ProbeResult) -> dict[str, Any]:
    return {"outcome": result.outcome, "line": (result.root_cause or {}).get("line"), "rank": (result.root_cause or {}).get("rank")}


def _busbw(result: ProbeResult) -> Optional[float]:
    values = [m["busbw_gbps"] for m in result.metrics if m.get("busbw_gbps") is not None]
    return max(values) if values else None


def _repair(ctx: ProbeContext, report: BisectReport, catalog: Any, probe_env: Callable) -> None:
    """Try every other catalogued value (and unset) of each culprit variable; recommend the best that passes."""
    full = report.baseline + report.atoms
    best_changes: dict[str, tuple[Optional[str], Optional[float]]] = {}
    for culprit in report.culprits:
        for atom in culprit:
            choices: list[Optional[str]] = [None]
            if atom.op == SET and catalog is not None and atom.var in catalog:
                try:
                    choices += [v for v in catalog.values(atom.var) if catalog.canonical(atom.var, v) != catalog.canonical(atom.var, atom.value)]
                except Exception:  # noqa: BLE001 - free-text domains have no value list: unset only
                    pass
            for value in choices:
                env = [a for a in full if a != atom] + ([] if value is None else [Atom(atom.var, SET, value)])
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
        for atom in culprit:
            if str(atom) in best_changes:
                value, _ = best_changes[str(atom)]
                recommended = [a for a in recommended if a != atom] + ([] if value is None else [Atom(atom.var, SET, value)])
                break  # one change per culprit set repairs it
    report.recommended = recommended
