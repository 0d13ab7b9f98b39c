"""The outcome cache and repeat policy: the only way a culprit search touches its oracle.

Flaky probes (``repeats=K`` with K > 1)
---------------------------------------
Every run of an atom set is a *vote*. A search probe runs its set until one
outcome has K votes (at most 2K-1 runs): that is its settled outcome. The
posterior, however, is fed every vote with a flip rate (``noise``, 0.2 by
default), so one unlucky settled outcome does not decide anything; the search
may run a set again (more repeats of that set) when that is the most
informative thing to do (that is a repeat of that set, never a new set for the
same atoms). Certificates are stricter: a certificate holds only when its exact
atom set was run and its expected outcome leads the other by at least K votes.
``Probes.confirm`` keeps running repeats of the set until the expected outcome
leads by K, or the other outcome leads by 2K (then the certificate is refuted),
at most ``8K`` runs of a set. The asymmetric stop means a true certificate is
seldom refuted by an unlucky streak, while a false one is accepted about as
rarely as with a symmetric K-lead test. Implications by monotonicity are not
used for certificates in this mode (two noisy outcomes can contradict each
other). The baseline and the full env are confirmed the same way (expected:
pass / fail) before the search concludes "baseline fails" or "env passes". A
refuted certificate only updates the posterior; the search goes on. After
``CERT_REJECTIONS`` refuted explanations the model-free search takes over (with
confirmed outcomes). When the probe budget runs out, the most likely answer is
returned with ``complete=False`` and method "budget".

With ``repeats=1`` outcomes are taken as exact: a probe is never launched for a
set whose outcome is cached or implied by monotonicity, and certificates may be
implied (a pass of a superset proves a pass).

Unresolved outcomes (skip, launch error, or a failure signature that says
nothing about this search's: see ``peel``, which runs one search per failure
signature and reads other signatures by their stage) carry no information: they are cached, never retried, and listed in the result;
``complete`` is False when a certificate could not be established.
"""

from __future__ import annotations

from typing import Callable, Optional

PASS, FAIL, UNRESOLVED = "pass", "fail", "unresolved"

Oracle = Callable[[frozenset], str]


class BudgetExhausted(RuntimeError):
    pass


class Probes:
    """Outcome cache + repeat policy; the only way the search touches the oracle.

    ``run`` settles a set (first outcome to K votes, at most 2K-1 runs);
    ``confirm`` (flaky mode) runs more repeats of a set until one outcome leads
    by K votes. ``listener(atoms, outcome)`` is called for every single run.
    """

    def __init__(self, n: int, oracle: Oracle, repeats: int = 1, known: Optional[dict] = None, budget: int = 400) -> None:
        self.n, self.oracle, self.repeats, self.budget = n, oracle, max(1, repeats), budget
        self.cache: dict[frozenset, str] = dict(known or {})
        self.given: set[frozenset] = set(self.cache)
        self.votes: dict[frozenset, list[str]] = {}
        self.launched = 0
        self.trail: list[tuple[frozenset, str]] = []
        self.listener: Optional[Callable[[frozenset, str], None]] = None
        self.max_runs = 8 * self.repeats

    # -- single runs
    def _launch(self, atoms: frozenset) -> str:
        if self.launched >= self.budget:
            raise BudgetExhausted(f"probe budget of {self.budget} exhausted")
        outcome = self.oracle(atoms)
        if outcome not in (PASS, FAIL):
            outcome = UNRESOLVED
        self.launched += 1
        self.votes.setdefault(atoms, []).append(outcome)
        if self.listener is not None:
            self.listener(atoms, outcome)
        return outcome

    def _settle_votes(self, atoms: frozenset, value: str) -> str:
        self.cache[atoms] = value
        self.trail.append((atoms, value))
        return value

    def run(self, atoms: frozenset) -> str:
        """Settled outcome of ``atoms``; launches only when not cached."""
        if atoms in self.cache:
            return self.cache[atoms]
        return self.rerun(atoms)

    def rerun(self, atoms: frozenset) -> str:
        """One more round of repeats of ``atoms`` (first to K votes in this round); re-settles by all votes."""
        round_votes: list[str] = []
        while True:
            round_votes.append(self._launch(atoms))
            for value in (FAIL, PASS, UNRESOLVED):
                if round_votes.count(value) >= self.repeats:
                    return self._settle_votes(atoms, self._majority(atoms, value))
            if len(round_votes) >= 2 * self.repeats - 1:
                return self._settle_votes(atoms, self._majority(atoms, max((FAIL, PASS, UNRESOLVED), key=round_votes.count)))

    def _majority(self, atoms: frozenset, fallback: str) -> str:
        votes = self.votes.get(atoms, [])
        f, p = votes.count(FAIL), votes.count(PASS)
        if f == p == 0:
            return UNRESOLVED
        if f == p:
            return fallback
        return FAIL if f > p else PASS

    def lead(self, atoms: frozenset) -> tuple[Optional[str], int]:
        votes = self.votes.get(atoms, [])
        f, p = votes.count(FAIL), votes.count(PASS)
        if f == p:
            return None, 0
        return (FAIL, f - p) if f > p else (PASS, p - f)

    def exhausted(self, atoms: frozenset) -> bool:
        """True when ``atoms`` may not be run again (unresolved, or its run cap reached)."""
        if self.cache.get(atoms) == UNRESOLVED:
            return True
        return len(self.votes.get(atoms, [])) >= self.max_runs

    def confirmed(self, atoms: frozenset) -> Optional[str]:
        """Flaky mode: the outcome that leads by K votes (or was given as known); None otherwise."""
        if atoms in self.given:
            value = self.cache[atoms]
            return value if value != UNRESOLVED else None
        value, margin = self.lead(atoms)
        return value if margin >= self.repeats else None

    def confirm(self, atoms: frozenset, expected: Optional[str] = None) -> Optional[str]:
        """Run repeats of ``atoms`` until one outcome leads by K votes (None at the run cap / unresolved).

        With ``expected``, the other outcome must lead by 2K votes before it is returned (a sequential
        test that rarely rejects a true certificate on an unlucky streak, and accepts a false one about
        as rarely as the symmetric test).
        """
        if atoms in self.given:
            return self.confirmed(atoms)
        if atoms not in self.cache:
            self.run(atoms)
        while True:
            value, margin = self.lead(atoms)
            if value is not None and margin >= (self.repeats if expected in (None, value) else 2 * self.repeats):
                self.cache[atoms] = value
                return value
            if self.exhausted(atoms):
                return None
            self._launch(atoms)
            self.cache[atoms] = self._majority(atoms, self.cache.get(atoms, UNRESOLVED))

    # -- implications
    def known(self, atoms: frozenset) -> Optional[str]:
        """Outcome implied by monotonicity from cached probes (None when unknown)."""
        if atoms in self.cache and self.cache[atoms] != UNRESOLVED:
            return self.cache[atoms]
        for tested, outcome in self.cache.items():
            if outcome == FAIL and tested <= atoms:
                return FAIL
            if outcome == PASS and atoms <= tested:
                return PASS
        return None

    def settle(self, atoms: frozenset) -> str:
        implied = self.known(atoms)
        return implied if implied is not None else self.run(atoms)

    def decide(self, atoms: frozenset, expected: Optional[str] = None) -> str:
        """Deterministic mode: ``settle``; flaky mode: ``confirm`` (UNRESOLVED when it cannot)."""
        if self.repeats == 1:
            return self.settle(atoms)
        return self.confirm(atoms, expected) or UNRESOLVED

    def certified(self, atoms: frozenset, expected: str) -> bool:
        if self.repeats == 1:
            return self.known(atoms) == expected
        return self.confirmed(atoms) == expected
