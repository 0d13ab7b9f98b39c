"""Bisect an env that fails in more than one way: one culprit search per failure signature (pure).

Masking model
-------------
A probe ends in ``pass`` or one failure *signature* (outcome class + normalised
root-cause line). Failures happen in stages (``STAGES``: load < init < collective <
wrong result / timeout / crash ...): a run stops at the first failure it meets,
so a set holding the culprits of an init failure S never shows a collective
failure T even when it also holds T's culprits (S masks T).

For the search of signature S's culprits, a probe's signature is read as:

- S: fails (the set holds an S culprit set);
- pass: passes;
- T of a *later* stage than S: passes for S (had the set held an S culprit
  set, S would have been met first);
- T of the same or an earlier stage (or a stage we cannot order): unknown
  (T may mask S), never "pass".

A bare non-zero exit (command probes) is staged by its line: an init-phase
line (init, bootstrap, "no device", NET/x :, transport) is init, anything else
after init. A loader or import failure line (a library path or plugin that does not
load) is the load stage, before init, whatever the outcome class. Two failures of
one stage with different lines stay unknown to each other, so such an env ends
inconclusive (exit 3) rather than guessed; when S's culprit sets are each proven
(fail alone, minimal) and only the env without them fails the other way, the
peeling still goes on, so every culprit and a passing env are named.

Required atoms: a probe that fails with a signature T masking S (same or earlier stage) may lack an atom
the env needs (a socket interface, a plugin path): without it every env fails with T, which hides S. The
first such probe of a search makes the baseline worth probing; when it fails with T too, the atoms whose
removal brings T back are searched (a culprit search over the atoms removed, monotone: removing more keeps
T) and, once proven, kept in every probe of S's search (``Section.required``): S's culprits are then found
with them in place, and are reported as needing them. Without that, every probe missing one of them said
nothing about S and the search spent the probe cap (exit 3).

Every probe's signature is kept in one cache shared by every search, so a
probe run for S's search also informs T's. Peeling: once S's culprit sets are
proven, the env without them (the repaired env of S, already probed as S's
certificate) is the next env; when it fails (another signature, or S with
another culprit) its culprits are searched among the remaining atoms, until the
repaired env passes. The final env is proven only by a passing probe: the env
without every culprit, or a probe that already passed holding all of it (and so
a part of each culprit set: fewer changes, no extra probe).

A chain of peeling removes whole culprit sets, so a culprit of a later stage nested in an earlier one (a variable
failing alone after init, and with a partner at init) is removed with it, unseen: a probe failing in a way no
named set explains (the env without the partner) is searched for its own culprits before the answer may be
complete, and the env without every named set is the final env. A failure with nothing provable (its line's
probes all answered by another line of its stage) no longer ends the peeling: the other lines' culprits and a
passing env still come out, incomplete. At the cap, sets the cache already proves for failures no search reached
are named too (no probe launched).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

import dataclasses

from envmatrix.bisect.certificates import EXPLAIN, STRICT, certificate_tests, minimal_transversals
from envmatrix.bisect.probe_cache import FAIL, PASS, UNRESOLVED, BudgetExhausted, Probes
from envmatrix.bisect.culprits import CulpritResult, find_culprits

Signature = Union[str, tuple]  # "pass", "unresolved", or (outcome, normalised line)
SigOracle = Callable[[frozenset], Signature]

# Earlier stage = masks later ones. Outcomes not listed cannot be ordered (unknown).
STAGES = {"launch_error": 0, "launcher_error": 0, "env_mismatch": 0, "init_error": 1, "collective_error": 2, "wrong_transport": 2,
          "exit_error": 2, "wrong_result": 3, "timeout": 3, "crash": 3}
# A bare non-zero exit (a command probe) is staged by its root-cause line: NCCL's init-phase messages
# (communicator init, bootstrap, transport/net setup) mean init; anything else happened after init.
_INIT_LINE = re.compile(r"init|bootstrap|no device|net/\w+ *:|transport")
# A program or its libraries that do not load at its start (a bad LD_LIBRARY_PATH / LD_PRELOAD / PYTHONPATH entry)
# fail before any communicator exists, whatever outcome class the probe gave it (torch's import in a rank is an
# init_error, the loader's message of a command a bare exit): earlier than every init failure, which they mask.
# Only Python's import errors and ld.so's start-up messages: a bare "cannot open shared object file" may be NCCL
# failing to dlopen a NET plugin during init, which an earlier init failure (bootstrap) can mask.
_LOAD_LINE = re.compile(r"\b(importerror|modulenotfounderror)\b|error while loading shared librar|symbol lookup error")
_LOAD_STAGE = 0.5  # between launch (0) and init (1)
# NCCL rejects a forced algorithm/protocol when the first collective is enqueued, after the communicator
# exists: a probe that runs a collective during its init phase (torch's barrier) reports it as init_error,
# but it happens after every real init failure (NET plugin, bootstrap, interfaces), which therefore mask it.
_FIRST_COLLECTIVE_LINE = re.compile(r"no algorithm/protocol available")


def stage(sig: Signature) -> Optional[float]:
    if not (isinstance(sig, tuple) and sig):
        return None
    if sig[0] in ("init_error", "exit_error", "collective_error") and len(sig) > 1 and _LOAD_LINE.search(str(sig[1] or "")):
        return _LOAD_STAGE
    if len(sig) > 1 and _FIRST_COLLECTIVE_LINE.search(str(sig[1] or "")):
        return STAGES["collective_error"]
    if sig[0] in ("exit_error", "collective_error") and len(sig) > 1 and _INIT_LINE.search(str(sig[1] or "")):
        return STAGES["init_error"]
    return STAGES.get(sig[0])


def same_failure(sig: Signature, target: Signature) -> bool:
    """Both failed with one root-cause line, whatever the class: ranks that print the error and exit sometimes
    abort on the way out (gloo's threads: "terminate called without an active exception"), so one culprit's runs
    end as exit_error or crash. Read by stage, a crash (later) said the culprit was absent."""
    if sig == target:
        return isinstance(sig, tuple)
    return isinstance(sig, tuple) and isinstance(target, tuple) and len(sig) > 1 and len(target) > 1 \
        and bool(sig[1]) and sig[1] == target[1]


def read_for(sig: Signature, target: Signature) -> str:
    """What a probe that ended in ``sig`` says about the culprits of ``target``."""
    if sig == PASS:
        return PASS
    if sig == UNRESOLVED or not isinstance(sig, tuple):
        return UNRESOLVED
    if same_failure(sig, target):
        return FAIL
    s, t = stage(sig), stage(target)
    if s is not None and t is not None and s > t:
        return PASS
    return UNRESOLVED


def default_max_probes(n: int) -> int:
    """4x the bits needed to name up to two culprit atoms among n (at least 24)."""
    choices = 1 + n + n * (n - 1) // 2
    return max(24, 4 * math.ceil(math.log2(max(2, choices))))


@dataclass
class Section:
    signature: Signature
    universe: list[int]  # the atoms (original indices) searched for this signature
    culprits: list[frozenset]  # original indices
    complete: bool
    method: str
    repaired: list[int]  # the env (original indices) without this section's culprits
    repaired_sig: Optional[Signature] = None
    required: list[int] = field(default_factory=list)  # atoms kept in every probe: without one, it failed with required_sig
    required_sig: Optional[Signature] = None


@dataclass
class PeelResult:
    sections: list[Section]
    probes: int
    trail: list[tuple[frozenset, Signature]]
    final_env: Optional[list[int]] = None  # proven passing env (original indices); None when not proven
    status: str = "ok"  # ok | env passes | env flaky | baseline fails | budget | incomplete
    suspects: list[int] = field(default_factory=list)  # atoms not cleared when the search stopped, most suspect first

    @property
    def culprits(self) -> list[frozenset]:
        return [c for s in self.sections for c in s.culprits]

    @property
    def complete(self) -> bool:
        return self.status == "ok" and self.final_env is not None and all(s.complete for s in self.sections)


class _Cache:
    def __init__(self, oracle: SigOracle, known: Optional[dict], budget: int) -> None:
        self.oracle, self.budget = oracle, budget
        self.sigs: dict[frozenset, Signature] = dict(known or {})
        self.launched = 0
        self.trail: list[tuple[frozenset, Signature]] = []

    def __call__(self, atoms: frozenset, fresh: bool = False) -> Signature:
        if atoms in self.sigs and not fresh:
            return self.sigs[atoms]
        if self.launched >= self.budget:
            raise _Budget()
        self.launched += 1
        sig = self.oracle(atoms)
        self.sigs[atoms] = sig
        self.trail.append((atoms, sig))
        return sig


_Budget = BudgetExhausted  # raised by the shared cache; find_culprits answers its best guess with method "budget"


def _settled(cache: _Cache, atoms: frozenset, repeats: int, expected: str = PASS) -> Signature:
    """The signature of ``atoms``: exact with repeats=1. Flaky: as ``probe_cache.Probes.confirm``, runs until the
    expected outcome (pass, or fail = any failure signature) leads by K votes, or the other one by 2K (at most
    8K runs); a failure answers with its most frequent signature."""
    if repeats == 1:
        return cache(atoms)
    votes: list = []
    while len(votes) < 8 * repeats:
        votes.append(cache(atoms, fresh=bool(votes) or atoms in cache.sigs))
        fails = [v for v in votes if v not in (PASS, UNRESOLVED)]
        lead = (len(votes) - votes.count(UNRESOLVED) - 2 * len(fails)) * (1 if expected == PASS else -1)
        if lead >= repeats:
            return PASS if expected == PASS else max(fails, key=fails.count)
        if -lead >= 2 * repeats:
            return max(fails, key=fails.count) if expected == PASS else PASS
    return UNRESOLVED


def complete_strictly(n: int, oracle: Callable[[frozenset], str], known: dict, found: CulpritResult) -> CulpritResult:
    """Run the strict checks an explain-level answer lacks (each culprit atom unset in the full env: what the
    repair tries first anyway); when one still fails, search on from every outcome seen (strict)."""
    universe = frozenset(range(n))
    probes = Probes(n, oracle, 1, known={**known, **dict(found.trail)}, budget=10**9)
    if all(probes.settle(atoms) == expected for atoms, expected in certificate_tests(universe, found.culprits, STRICT)):
        return dataclasses.replace(found, trail=found.trail + probes.trail, probes=found.probes + probes.launched)
    more = find_culprits(n, oracle, known=probes.cache, certify=STRICT, budget=10**9)
    return dataclasses.replace(more, trail=found.trail + probes.trail + more.trail, probes=found.probes + probes.launched + more.probes)


def _proven_culprit(sigs: dict, atoms: frozenset, target: Signature, pins: frozenset = frozenset()) -> bool:
    """``atoms`` is a proven minimal failing set for ``target``: it failed so, and each set one atom smaller passed
    for it, or lies inside a probe that did (monotone: a set holding no culprit of ``target`` holds none inside);
    every one of these probes with the required atoms ``pins`` kept."""
    clear = [probed for probed, sig in sigs.items() if pins <= probed and read_for(sig, target) == PASS]

    def passes(subset: frozenset) -> bool:
        return any(subset | pins <= probed for probed in clear)

    probed = atoms | pins
    return bool(atoms) and probed in sigs and read_for(sigs[probed], target) == FAIL and all(passes(atoms - {x}) for x in atoms)


def _ranked_suspects(sigs: dict, universe: list[int], proven: list[frozenset], target: Signature) -> list[int]:
    """The atoms of ``universe`` outside the proven culprit sets, none cleared, most suspect first: the fewer
    passing probes held an atom and the more failing ones did, the likelier it belongs to a culprit set."""
    known = set().union(*proven) if proven else set()
    reads = [(atoms, read_for(sig, target)) for atoms, sig in sigs.items()]

    def rank(atom: int) -> tuple[int, int, int]:
        held = [value for atoms, value in reads if atom in atoms]
        return held.count(PASS), -held.count(FAIL), atom

    return sorted((a for a in universe if a not in known), key=rank)


REQUIRED_SEARCH_PROBES = 4


class _Required(Exception):
    """Atoms the env needs were found while a search ran: it starts again with them kept."""

    def __init__(self, atoms: frozenset, sig: Signature) -> None:
        super().__init__(atoms, sig)
        self.atoms, self.sig = atoms, sig


def masks(sig: Signature, target: Signature) -> bool:
    """``sig`` is a failure that may hide ``target``'s: another line, of the same or an earlier stage."""
    if not (isinstance(sig, tuple) and isinstance(target, tuple)) or same_failure(sig, target):
        return False
    s, t = stage(sig), stage(target)
    return s is not None and t is not None and s <= t


def _required_atoms(cache: "_Cache", universe: list[int], masking: Signature) -> Optional[frozenset]:
    """The atoms of ``universe`` without any of which the env fails with ``masking`` (a variable the env needs),
    proven by a culprit search over the atoms *removed* (removing more keeps the failure); None when the empty
    env does not fail so (nothing is required) or the search cannot prove its answer."""
    if not same_failure(cache(frozenset()), masking):
        return None
    full = frozenset(universe)

    def read(sig: Signature) -> str:
        return FAIL if same_failure(sig, masking) else read_for(sig, masking)

    known = {frozenset(i for i, a in enumerate(universe) if a not in atoms): read(sig)
             for atoms, sig in cache.sigs.items() if atoms <= full and read(sig) != UNRESOLVED}
    # a few probes past a bisection of the atoms: a masking failure that is no missing atom gives up early
    res = find_culprits(len(universe), lambda removed: read(cache(full - {universe[i] for i in removed})), known=known,
                        certify=STRICT, budget=REQUIRED_SEARCH_PROBES + math.ceil(math.log2(len(universe) + 1)))
    if not (res.complete and res.culprits):
        return None
    return frozenset(universe[i] for c in res.culprits for i in c)


def _unexplained(sigs: dict, sections: list[Section]) -> Optional[tuple[frozenset, Signature]]:
    """The smallest probe failing in a way the named culprit sets do not explain: no set of its signature lies
    in it, no search of its signature covered its atoms, and it holds every atom the env was found to need."""
    for atoms, sig in sorted(sigs.items(), key=lambda item: (len(item[0]), sorted(item[0]))):
        if not isinstance(sig, tuple) or same_failure(sigs.get(frozenset()), sig):
            continue
        mine = [s for s in sections if same_failure(sig, s.signature)]
        if any(c <= atoms for s in mine for c in s.culprits) or any(atoms <= set(s.universe) | set(s.required) for s in mine):
            continue
        if any(s.required and not set(s.required) <= atoms and same_failure(sig, s.required_sig) for s in sections):
            continue
        return atoms, sig
    return None


def _proven_unsearched(sigs: dict, sections: list[Section]) -> list[tuple[Signature, list[frozenset], list[int]]]:
    """For each failure signature no section searched: the probes failing so that the cache proves minimal (each
    probe one atom smaller passed for it, or lies in one that did), with the atoms of every probe failing so."""
    found: list[tuple[Signature, list[frozenset], list[int]]] = []
    for atoms, sig in sorted(sigs.items(), key=lambda item: (len(item[0]), sorted(item[0]))):
        if not isinstance(sig, tuple) or same_failure(sigs.get(frozenset()), sig) or any(same_failure(sig, f[0]) for f in found) \
                or any(same_failure(sig, s.signature) or same_failure(sig, s.required_sig) for s in sections):
            continue  # searched already, or a missing atom's failure (the empty env's, a required atom's)
        failing = [a for a, other in sigs.items() if same_failure(other, sig)]
        proven = [a for a in failing if _proven_culprit(sigs, a, sig)]
        if proven:
            found.append((sig, sorted(proven, key=sorted), sorted(frozenset().union(*failing))))
    return found


def find_all_culprits(n: int, oracle: SigOracle, *, known: Optional[dict] = None, max_probes: Optional[int] = None,
                      repeats: int = 1, certify: str = EXPLAIN, seed: int = 0, strict_after: bool = False) -> PeelResult:
    """Culprit sets of every failure signature of atoms 0..n-1, peeling one signature at a time.

    ``known``: signatures observed earlier (stored sweep results): used, never counted.
    ``strict_after``: after an explain-level answer, also prove no overlapping culprit set exists (each culprit
    atom unset in the env; the bisect driver does, the issue-4 bench counts explain only).
    """
    # flaky: each set may run up to 8K times before a certificate settles (probe_cache.Probes.confirm)
    budget = (default_max_probes(n) * (1 if repeats == 1 else 4 * repeats)) if max_probes is None else max_probes
    cache = _Cache(oracle, known, budget)
    sections: list[Section] = []
    universe = list(range(n))

    def done(status: str, final: Optional[list[int]] = None, suspects: Optional[list[int]] = None) -> PeelResult:
        return PeelResult(sections, cache.launched, cache.trail, final, status, list(suspects or []))

    target: Signature = UNRESOLVED  # reads nothing as pass or fail until the env's own signature is known
    unproven = False  # a section's culprits may be incomplete (see below): the final env then ends "incomplete"
    final: Optional[list[int]] = None  # the proven passing env so far (kept when the cap ends a later search)
    searched_on = False  # a search over a probe's atoms ran (see wrap_up)
    strict = repeats == 1 and (certify == STRICT or strict_after)  # each section's answer is checked strictly

    def at_cap(suspects: list[int]) -> PeelResult:
        """The cap ended a search: name what the probes already proved for failures no search reached (a set that
        failed alone, each set one atom smaller passing for it) and a passing env without every named set, if
        one was probed; nothing more is launched."""
        if repeats > 1:
            return done("budget", None, suspects)
        for sig, sets, seen in _proven_unsearched(cache.sigs, sections):
            sections.append(Section(sig, seen, sets, False, "budget", []))
        named = frozenset().union(*(c for s in sections for c in s.culprits))
        holding = [a for a, sig in cache.sigs.items() if sig == PASS and frozenset(range(n)) - named <= a]
        return done("budget", sorted(max(holding, key=len)) if named and holding else final, suspects)

    def wrap_up(passing: Optional[list[int]]) -> Union[PeelResult, tuple[list[int], Signature]]:
        """A chain of peeling ended (its env passed: ``passing``, or nothing could be named). Exact mode: a probe
        failing in a way no named set explains holds unnamed culprits (a variable failing alone one way and with
        a partner an earlier way: the chain removed both): search its atoms for them; else the env without every
        named set is the final env, proven by a passing probe. Returns the next (universe, target) or the result."""
        nonlocal final, searched_on, unproven
        final = final or passing
        if repeats > 1:
            return done("incomplete" if unproven or passing is None else "ok", passing)
        left = _unexplained(cache.sigs, sections)
        if left is not None and same_failure(cache(frozenset()), left[1]):
            left = _unexplained(cache.sigs, sections)  # the empty env fails so: a missing atom's failure, no culprit's
        if left is not None:
            searched_on = True
            return sorted(left[0] | pins), left[1]
        if strict and not unproven:
            # the answer's own strict check: the env without one atom of every named set (of any signature)
            # passes; a later line's culprit nested in an earlier pair shows only there (an answer already
            # unproven cannot become complete: no probes spent on it)
            for hit in minimal_transversals([c for s in sections for c in s.culprits]):
                env = frozenset(range(n)) - hit
                if (sig := cache(env)) == PASS:
                    continue
                if _unexplained({env: sig}, sections) is None or same_failure(cache.sigs.get(frozenset()), sig):
                    unproven = True  # a missing atom's failure: nothing proves the answer whole
                    continue
                searched_on = True
                return sorted(env), sig
        if passing is not None and not searched_on:
            return done("incomplete" if unproven else "ok", passing)
        named = frozenset().union(*(c for s in sections for c in s.culprits))
        rest = [a for a in range(n) if a not in named]
        holding = [a for a, sig in cache.sigs.items() if sig == PASS and set(rest) <= a]  # fewer changes, no probe
        if holding:
            final = sorted(max(holding, key=len))
        elif (sig := cache(frozenset(rest))) == PASS:
            final = rest
        elif _unexplained({frozenset(rest): sig}, sections) is not None:
            searched_on = True
            return rest, sig
        else:
            return done("incomplete", None, rest)
        return done("incomplete" if unproven else "ok", final)
    try:
        target = _settled(cache, frozenset(universe), repeats, FAIL)
        if target == PASS:
            # With repeats, a run of the env that failed says it fails at times: flaky, not "nothing to bisect"
            # (exit 0 read as passed by CI; an env failing one run in two settled "passes" one time in three).
            whole = frozenset(universe)
            env_runs = [sig for atoms, sig in [*(known or {}).items(), *cache.trail] if atoms == whole]  # a stored run too
            if repeats > 1 and any(sig != PASS for sig in env_runs):
                return done("env flaky")
            return done("env passes", universe)
        # exact mode: the search probes the baseline only when no passing probe has proven it (culprits.py)
        if repeats > 1 and _settled(cache, frozenset(), repeats) != PASS:
            return done("baseline fails")
        pins: frozenset = frozenset()  # required atoms, kept in every probe (see the module docstring)
        pins_sig: Optional[Signature] = None
        checked: set = set()  # targets whose masking failures were looked at for required atoms
        while True:
            if target == PASS:
                return done("ok", universe)
            free = [a for a in universe if a not in pins]
            local = dict(enumerate(free))

            def to_orig(atoms: frozenset) -> frozenset:
                return frozenset(local[i] for i in atoms)

            def look_for_required(sig: Signature, _t=target, _universe=universe) -> None:
                """The first failure that may hide the target's: are there atoms without which every env fails so?
                (exact mode only; once per target)"""
                if repeats == 1 and _t not in checked and masks(sig, _t):
                    checked.add(_t)
                    found = _required_atoms(cache, _universe, sig)
                    if found:
                        raise _Required(found, sig)

            def sub_oracle(atoms: frozenset, _t=target, _pins=pins) -> str:
                # a flaky repeat of a set is a fresh run; otherwise the shared cache answers
                probed = to_orig(atoms) | _pins
                sig = cache(probed, fresh=repeats > 1 and probed in cache.sigs)
                look_for_required(sig)
                return read_for(sig, _t)

            inside = set(universe)
            # flaky: the env and the baseline as settled here are given (as the driver always did); nothing else
            sub_known = {} if repeats == 1 else {frozenset(): PASS, frozenset(range(len(free))): FAIL}
            if repeats == 1:
                back = {a: i for i, a in local.items()}
                for atoms, sig in cache.sigs.items():
                    if pins <= atoms <= inside:
                        value = read_for(sig, target)
                        if value != UNRESOLVED:
                            sub_known[frozenset(back[a] for a in atoms - pins)] = value
            try:
                for atoms, sig in list(cache.sigs.items()):
                    if pins <= atoms <= inside:
                        look_for_required(sig)
                res = find_culprits(len(free), sub_oracle, repeats=repeats, known=sub_known, certify=certify,
                                    seed=seed, budget=10**9)  # the shared cache enforces the cap
                if strict_after and certify == EXPLAIN and repeats == 1 and res.complete:
                    res = complete_strictly(len(free), sub_oracle, sub_known, res)
            except _Required as required:
                pins, pins_sig = pins | required.atoms, required.sig
                continue  # the same search again, from the cache, with the required atoms kept

            def section(culprits: list, complete: bool, method: str, rest: list, sig_rest: Optional[Signature] = None) -> Section:
                return Section(target, list(free), culprits, complete, method, rest, sig_rest, sorted(pins), pins_sig if pins else None)

            if res.method == "baseline fails":
                return done("baseline fails")
            culprits = [to_orig(c) for c in res.culprits]
            if not res.complete and repeats == 1:  # an unfinished search names only the sets its probes proved
                culprits = [c for c in culprits if _proven_culprit(cache.sigs, c, target, pins)]
            if res.method == "budget" or cache.launched >= budget and not res.complete:
                # At the cap the search's best guess is no answer: only sets the probes proved are culprits,
                # every other atom of this search stays suspect (nothing short of a complete answer clears one).
                proven = [c for c in culprits if _proven_culprit(cache.sigs, c, target, pins)]
                sections.append(section(proven, False, "budget", []))
                return at_cap(_ranked_suspects(cache.sigs, free, proven, target))
            if not culprits:
                sections.append(section([], False, res.method, []))
                if repeats > 1:
                    return done("incomplete", None, list(universe))
                # Nothing is proven for this failure (every probe that could tell failed another way of its
                # stage), but those other failures may have culprits the probes did prove, and a passing env.
                unproven = True
                step = wrap_up(None)
                if isinstance(step, PeelResult):
                    return step
                universe, target = step
                continue
            rest = [a for a in universe if a not in set().union(*culprits)]
            # A probe that passed and holds the rest (but no whole culprit set) is already a proven repaired
            # env, with fewer changes: no need to probe the rest itself.
            passed = [a for a, sig in cache.sigs.items() if sig == PASS and set(rest) <= a <= inside] if repeats == 1 else []
            if passed:
                sig_rest, proven = PASS, sorted(max(passed, key=len))
            else:
                sig_rest, proven = _settled(cache, frozenset(rest), repeats), rest
            sections.append(section(culprits, res.complete, res.method, rest, sig_rest))
            if not res.complete:
                # The env without this signature's culprits fails another way that cannot be ordered against it
                # (same stage): that failure may hide more of them, so this section stays unproven, yet each set
                # named is proven (fails alone, minimal). Peel on: the other culprits and a passing env still
                # come out; the answer stays incomplete.
                if not (repeats == 1 and (sig_rest == PASS or isinstance(sig_rest, tuple) and sig_rest != target)
                        and all(_proven_culprit(cache.sigs, c, target, pins) for c in culprits)):
                    return done("incomplete", None, list(universe))
                unproven = True
            if sig_rest == PASS:
                step = wrap_up(proven)
                if isinstance(step, PeelResult):
                    return step
                universe, target = step
                continue
            universe, target = rest, sig_rest
            if target != PASS and (target == UNRESOLVED or not isinstance(target, tuple)):
                return done("incomplete", None, rest)
    except _Budget:
        return at_cap(_ranked_suspects(cache.sigs, universe, [], target))
