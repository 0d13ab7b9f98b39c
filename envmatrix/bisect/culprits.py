"""Find every minimal failing subset of atoms with few probes (pure; the oracle runs probes).

The failure is assumed monotone: adding atoms to a failing env keeps it
failing. The search keeps a posterior over a class of likely explanations
(one culprit, an interacting pair or triple, two independent culprits) and
greedily picks the probe that most reduces the expected remaining work:
the bits still needed to identify the explanation plus the certificate
probes the explanation will still need (a probe that is a certificate of
likely explanations is worth more than its information alone). The answer is
never taken from the model: it is returned only with a certificate of real
probes, at one of two levels (``certify``):

- ``explain``: each culprit set M fails on its own, M minus any one atom
  passes (M is minimal), and the env without every found atom passes (the
  repaired env: the found sets explain the whole failure);
- ``strict``: in addition, for every minimal hitting set H of the found sets,
  the env without H passes (no other culprit set exists, not even one that
  shares atoms with a found set).

``explain`` is what the issue-4 probe counts measure (like QuickXplain plus a
repaired-env check); the bisect driver then tries each culprit atom unset in
the full env during repair (the strict checks, which a user wants anyway: "does
changing this one variable fix it?") and continues the search from the cache
when one of them still fails. Without repair, or with flaky probes, the driver
asks the search for ``strict``.

The baseline (the empty set) is not launched up front with exact probes: any passing probe proves it
passes (monotone), and every certificate above holds one (the repaired env), so a separate baseline probe is
a redundant proof. The class carries "the baseline fails" (every set fails) with a small prior instead; when
the search's probes keep failing it becomes worth probing the baseline, and a failing baseline ends the
search ("baseline fails", about 5 probes more than probing it first at n = 24). It is probed outright only
once "the baseline fails" holds half the posterior, not as soon as it leads (at 40 atoms its small prior
leads before any probe). With flaky probes the baseline is confirmed first, as no implication between noisy
outcomes is used.

The search numbers the atoms in its own seeded random order, so its ties (the first split, equally suspect
atoms) fall independently of where the culprits sit in the caller's env: related variables written next to
each other, or culprits at both ends of a site script, cost on average what a random placement costs.

When the class cannot explain what the probes showed, a model-free search
(prefix bisection plus dualisation) takes over from the cached outcomes and
the culprit sets already proven.

The parts: ``probe_cache`` (outcome cache, repeats and flaky votes), ``posterior`` (the class and its
posterior), ``selection`` (the next probe), ``certificates`` (what proves an answer), ``model_free`` (the
fallback). ``peel`` runs one search per failure signature.

Using it outside env bisection (bad hosts, bad host pairs, ...)
---------------------------------------------------------------
Number the suspects 0..n-1 and give ``find_culprits`` an oracle that takes a frozenset of suspect indices,
runs the real check with exactly those suspects included (the rest excluded) and answers ``PASS``, ``FAIL`` or
``UNRESOLVED``. The failure must be monotone (including more suspects never repairs it) and the empty set must
pass. Each returned culprit set is a minimal failing set: a bad host alone is a set of one, a bad link between
two hosts is a set of two that fail only together (an interacting pair). Example::

    from envmatrix.bisect import PASS, FAIL, find_culprits
    hosts = ["h1", "h2", "h3", "h4"]
    result = find_culprits(len(hosts), lambda s: FAIL if run_on([hosts[i] for i in s]) else PASS)
    bad = [[hosts[i] for i in sorted(c)] for c in result.culprits]  # e.g. [["h2", "h3"]]: a bad pair
    assert result.complete  # every culprit set proven by real probes

``known`` passes outcomes already observed (free probes); ``repeats`` > 1 settles flaky checks by votes.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Optional

from envmatrix.bisect.certificates import CERTIFY_LEVELS, EXPLAIN, STRICT, certificate_tests, proven_sets
from envmatrix.bisect.model_free import model_free
from envmatrix.bisect.posterior import HypothesisClass, Model
from envmatrix.bisect.probe_cache import FAIL, PASS, UNRESOLVED, BudgetExhausted, Oracle, Probes
from envmatrix.bisect.selection import LAMBDA, choose_test

# Prior of "the baseline fails" while it is unprobed: small, so a normal search pays ~0.03 bits for it and
# probes the baseline only once about log2(1 / BASELINE_FAILS) probes in a row have failed.
BASELINE_FAILS = 0.02
# ... and probed outright once it is that likely. Merely leading is not enough: with n atoms each single culprit
# starts at 0.55 / n, below 0.02 from n = 28 on, so the baseline (which nearly always passes) would be probed
# second at 40 variables; below this the probe choice decides (the baseline is one of its candidates).
BASELINE_PROBE_AT = 0.5

__all__ = ["EXPLAIN", "FAIL", "PASS", "STRICT", "UNRESOLVED", "HypothesisClass", "CulpritResult", "find_culprits"]


@dataclass
class CulpritResult:
    culprits: list[frozenset]  # the minimal failing subsets (atom indices)
    probes: int  # probes launched (repeats included)
    trail: list[tuple[frozenset, str]]  # every probe in order with its settled outcome
    complete: bool  # certificates all hold
    unresolved: list[frozenset] = field(default_factory=list)
    method: str = "model"



CERT_REJECTIONS = 10
# Exact mode: this many search probes in a row that said nothing (another failure of the same stage answered
# each) end the search with its proven sets. Three culprits of an init failure, a crash and a hang among 9-15
# atoms spent the default cap on probes that all hung (exit 3, the hang's culprit never searched).
UNRESOLVED_STREAK = 4


def find_culprits(
    n: int,
    oracle: Oracle,
    *,
    repeats: int = 1,
    known: Optional[dict[frozenset, str]] = None,
    cls: HypothesisClass = HypothesisClass(),
    seed: int = 0,
    budget: int = 400,
    noise: Optional[float] = None,
    confidence: float = 0.9,
    certify: str = STRICT,
) -> CulpritResult:
    """All minimal failing subsets of atoms 0..n-1, assuming the empty set passes and the full set fails.

    ``known`` may hold outcomes proven earlier (e.g. a baseline already in the
    store); the full set is probed here otherwise, the baseline only when no
    passing probe proves it (up front with ``repeats`` > 1).
    ``noise``: the flip rate the posterior assumes per vote when ``repeats`` > 1
    (default 0.2); ``confidence``: the posterior an explanation needs before its
    certificates are confirmed (flaky mode); ``certify``: ``strict`` or ``explain``
    (see the module docstring).
    """
    if certify not in CERTIFY_LEVELS:
        raise ValueError(f"certify: {certify!r} not allowed; allowed: {', '.join(CERTIFY_LEVELS)}")
    # The search sees the atoms in a seeded random order: where ties between equally suspect atoms are broken
    # (first split, candidate ranking) is then unrelated to where the culprits sit in the caller's env, so the
    # cost of any placement (related variables next to each other, culprits at the ends) is on average that
    # of a random one.
    order = list(range(n))
    random.Random(f"atom-order:{seed}:{n}").shuffle(order)
    inner = {atom: i for i, atom in enumerate(order)}

    def outer(atoms: frozenset) -> frozenset:
        return frozenset(order[i] for i in atoms)

    result = _search(n, lambda atoms: oracle(outer(atoms)), repeats=repeats,
                     known={frozenset(inner[a] for a in atoms): o for atoms, o in (known or {}).items()}, cls=cls,
                     seed=seed, budget=budget, noise=noise, confidence=confidence, certify=certify)
    return dataclasses.replace(result, culprits=sorted(map(outer, result.culprits), key=sorted),
                               trail=[(outer(atoms), o) for atoms, o in result.trail],
                               unresolved=[outer(atoms) for atoms in result.unresolved])


def _search(n: int, oracle: Oracle, *, repeats: int, known: Optional[dict[frozenset, str]], cls: HypothesisClass,
            seed: int, budget: int, noise: Optional[float], confidence: float, certify: str) -> CulpritResult:
    universe = frozenset(range(n))
    probes = Probes(n, oracle, repeats, known, budget)
    flaky = probes.repeats > 1
    flip = (0.2 if noise is None else noise) if flaky else 0.0
    rng = random.Random(seed)
    # Exact mode does not launch the baseline up front: any passing probe proves it passes (monotone), and
    # every answer's certificate holds a passing probe (its repaired env). The model carries "the baseline
    # fails" as an explanation instead, so the search probes it when its probes keep failing.
    lazy_baseline = not flaky and frozenset() not in probes.cache
    model = Model(n, dataclasses.replace(cls, baseline_fails=BASELINE_FAILS if lazy_baseline else 0.0), flip, certify)
    baseline_fails = lambda: CulpritResult([], probes.launched, probes.trail, False, [frozenset()], "baseline fails")

    def record(atoms: frozenset, outcome: str) -> None:
        if flaky:
            model.observe(atoms, outcome)

    try:
        if not lazy_baseline and probes.decide(frozenset(), PASS) != PASS:
            return baseline_fails()
        if probes.decide(universe, FAIL) != FAIL:
            unresolved = [universe] if probes.decide(universe, FAIL) == UNRESOLVED else []
            return CulpritResult([], probes.launched, probes.trail, False, unresolved, "env passes")
    except BudgetExhausted:
        return CulpritResult([], probes.launched, probes.trail, False, [], "budget")
    # outcomes known so far (given or just probed) feed the model
    for atoms, outcome in list(probes.cache.items()):
        if flaky and atoms not in probes.given:
            for vote in probes.votes.get(atoms, []):
                model.observe(atoms, vote)
        else:
            model.observe(atoms, outcome)
        if not flaky:
            model.establish(atoms, outcome, implied=True)
        elif probes.confirmed(atoms) is not None:
            model.establish(atoms, probes.confirmed(atoms), implied=False)
    probes.listener = record
    method = "model"
    culprits: list[frozenset] = []
    rejections = 0
    unresolved_streak = 0
    try:
        while model.alive and n > 1:
            i = model.map_index()
            sets = model.sets(i)
            baseline_leads = sets == [frozenset()]
            if baseline_leads and model.map_weight() >= BASELINE_PROBE_AT:
                if probes.settle(frozenset()) != PASS:
                    return baseline_fails()
                model.observe(frozenset(), PASS)
                continue
            certs = [] if baseline_leads else certificate_tests(universe, sets, certify)
            if not flaky:
                if certs and all(probes.certified(a, o) for a, o in certs):
                    return _finish(probes, universe, certify, sets, method)
                # a certificate that can never be established: report the best explanation, incomplete
                stuck = [a for a, o in certs if not probes.certified(a, o) and probes.cache.get(a) == UNRESOLVED]
                if stuck and model.map_weight() > 0.999:
                    return _finish(probes, universe, certify, sets, method)
            elif model.map_weight() >= confidence:
                ok = True
                for atoms, expected in certs:
                    outcome = probes.confirm(atoms, expected)
                    if outcome is not None:
                        model.establish(atoms, outcome, implied=False)
                    if outcome != expected:
                        ok = False
                        break
                if ok:
                    return _finish(probes, universe, certify, sets, method)
                rejections += 1
                if outcome is None and model.map_index() == i and model.map_weight() >= confidence:
                    return _finish(probes, universe, certify, sets, method)  # cannot be certified: incomplete
                if rejections >= CERT_REJECTIONS:
                    break
                continue
            test = choose_test(model, probes, universe, rng, LAMBDA, flaky)
            if test is None:
                break
            outcome = probes.rerun(test) if (flaky and test in probes.cache) else probes.run(test)
            if not test and outcome != PASS:
                return baseline_fails()
            unresolved_streak = unresolved_streak + 1 if outcome == UNRESOLVED else 0
            if not flaky and unresolved_streak >= UNRESOLVED_STREAK:
                # The leading explanation's sets are proven (each fails, each one atom smaller passes), and
                # another failure answers every probe that could tell whether more exist (one of the same stage,
                # which hides this one): stop with them, incomplete, rather than spend the cap on it. The
                # caller (peel) goes on with that other failure.
                leading = model.map_sets()
                if leading and set(proven_sets(probes, universe, leading)) == set(leading):
                    return _finish(probes, universe, certify, leading, "stuck")
            if not flaky:
                model.observe(test, outcome)
                model.establish(test, outcome, implied=True)
            elif probes.confirmed(test) is not None:
                model.establish(test, probes.confirmed(test), implied=False)
        method = "model-free"
        if lazy_baseline and probes.settle(frozenset()) != PASS:
            return baseline_fails()
        found = proven_sets(probes, universe, [s for a, o in probes.cache.items() if o == FAIL for s in [a]] + model.map_sets())
        culprits = model_free(probes, universe, found)
        return _finish(probes, universe, certify, culprits, method)
    except BudgetExhausted:
        best = culprits or (model.map_sets() if model.alive else [])
        return _finish(probes, universe, certify, best, "budget")


def _finish(probes: Probes, universe: frozenset, certify: str, culprits: list[frozenset], method: str) -> CulpritResult:
    unresolved = [a for a, o in probes.cache.items() if o == UNRESOLVED]
    complete = bool(culprits) and all(probes.certified(a, expected) for a, expected in certificate_tests(universe, culprits, certify))
    return CulpritResult(sorted(culprits, key=sorted), probes.launched, probes.trail, complete, unresolved, method)
