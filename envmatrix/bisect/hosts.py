"""Host bisect: which hosts, and which host pairs, make a multi-host run fail or slow; pure.

The caller gives ``run_round``: it runs every host group of a round AT THE SAME TIME (the groups are
disjoint) and answers one verdict per group (``ok``, ``failing``, ``slow``, ``unresolved``). The search:

1. each host alone (one round): a host that fails alone is a culprit;
2. rounds of disjoint pairs of the remaining hosts (round-robin, a 1-factorization: N-1 rounds cover every
   pair, N rounds when N is odd, one host sitting out each), each round followed, when nothing is left to
   explain, by one run of all remaining hosts together: when it passes the search ends, so most searches
   run one pair round, not N-1;
3. the hosts of the failing pairs are suspects, resolved by group testing with the culprit search that finds
   culprit variables (``envmatrix.bisect.find_culprits``): a suspect set S is tested together with an anchor
   host known to be good, a bad host is a culprit set of one, a bad link between two hosts an interacting
   pair. One round first tests every suspect with its own anchor at once; the search starts from those
   outcomes, so one bad host costs no sequential probes.

Verdicts are monotone (adding a bad host or both ends of a bad link to a group keeps it failing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

OK, FAILING, SLOW, UNRESOLVED = "ok", "failing", "slow", "unresolved"
VERDICTS = (OK, FAILING, SLOW, UNRESOLVED)
_BAD = (FAILING, SLOW)


@dataclass(frozen=True)
class Evidence:
    round: int
    hosts: tuple[str, ...]
    verdict: str
    run: str = ""  # where the run's result lives (run key / result dir), for the report


RunRound = Callable[[int, list[tuple[str, ...]]], list[Evidence]]


def round_robin(n: int) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint pairs covering every pair of 0..n-1 once (circle method): n-1 rounds, n when odd."""
    if n < 2:
        return []
    players: list[Optional[int]] = list(range(n)) + ([None] if n % 2 else [])
    m = len(players)
    rounds = []
    for _ in range(m - 1):
        pairs = [(players[i], players[m - 1 - i]) for i in range(m // 2)]
        rounds.append([tuple(sorted((a, b))) for a, b in pairs if a is not None and b is not None])
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


@dataclass
class HostVerdict:
    host: str
    status: str  # ok / failing / slow / unresolved
    why: str  # "fails alone", "fails with any partner", "link to node3", ...
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class HostBisectResult:
    hosts: list[str]
    verdicts: dict[str, HostVerdict]
    culprits: list[tuple[str, ...]]  # (host,) a bad host, (a, b) a bad link
    exclude: list[str]
    rounds: int
    runs: int
    complete: bool  # the remaining hosts passed together
    evidence: list[Evidence]
    note: str = ""

    @property
    def exclude_line(self) -> str:
        return "exclude: " + ",".join(self.exclude)

    def hostfile(self, slots: Optional[dict[str, Optional[int]]] = None) -> str:
        slots = slots or {}
        return "".join(f"{h} slots={slots[h]}\n" if slots.get(h) else f"{h}\n" for h in self.hosts if h not in self.exclude)


class _Rounds:
    """Counts rounds and runs, keeps every piece of evidence."""

    def __init__(self, run_round: RunRound) -> None:
        self.run_round, self.rounds, self.runs, self.evidence = run_round, 0, 0, []

    def __call__(self, groups: list[tuple[str, ...]]) -> list[Evidence]:
        if not groups:
            return []
        self.rounds += 1
        self.runs += len(groups)
        got = self.run_round(self.rounds, groups)
        if len(got) != len(groups) or any(e.verdict not in VERDICTS for e in got):
            raise ValueError(f"run_round answered {[e.verdict for e in got]} for {len(groups)} groups; allowed: {', '.join(VERDICTS)}")
        self.evidence += got
        return got


PAIR_ROUNDS_UP_TO = 8  # more remaining hosts than this: after one pair round, group-test them all instead


def localise(hosts: Sequence[str], run_round: RunRound, seed: int = 0) -> HostBisectResult:
    """The culprit hosts and host pairs of ``hosts`` (see the module docstring)."""
    hosts = list(dict.fromkeys(hosts))
    rr = _Rounds(run_round)
    culprits: list[tuple[str, ...]] = []
    worst: dict[tuple[str, ...], str] = {}
    unresolved: list[str] = []
    note = ""
    for e in rr([(h,) for h in hosts]):
        if e.verdict in _BAD:
            culprits.append(e.hosts)
            worst[e.hosts] = e.verdict
        elif e.verdict == UNRESOLVED:
            unresolved.append(e.hosts[0])
    good = [h for h in hosts if (h,) not in culprits and h not in unresolved]
    schedule = round_robin(len(good))

    def remaining() -> list[str]:
        return [h for h in good if not any(h in c for c in culprits)]

    def together() -> Optional[str]:
        """None when the remaining hosts pass together (or are too few to test), else the verdict."""
        rest = remaining()
        if len(rest) <= 1:
            return None
        (check,) = rr([tuple(rest)])
        return None if check.verdict == OK else check.verdict

    # Hosts that failed alone usually explain everything: check the rest together before any pair round.
    failing_together = together() if culprits else (OK if len(remaining()) > 1 else None)
    rounds_done = 0
    while failing_together is not None:
        if failing_together == UNRESOLVED:
            note = "the remaining hosts together: unresolved"
            break
        rest = remaining()
        if rounds_done < len(schedule) and (rounds_done == 0 or len(rest) <= PAIR_ROUNDS_UP_TO):
            pairs = schedule[rounds_done]
            rounds_done += 1
            groups = [(good[a], good[b]) for a, b in pairs if good[a] in rest and good[b] in rest]
            outcome = {e.hosts: e for e in rr(groups)}
            failing = [g for g, e in outcome.items() if e.verdict in _BAD]
            anchors = [h for g, e in outcome.items() if e.verdict == OK for h in g]
            if not failing:
                if failing_together == OK:  # nothing known to fail yet: the rest together decides
                    failing_together = together()
                continue
            if not anchors:
                note = "no pair passed in a pair round: no known-good anchor to test suspects against"
                break
            found, verdicts = _group_test([h for g in failing for h in g], anchors, rr, failing, outcome, seed)
        else:
            found, verdicts = _group_all(rest, rr, seed)
        if not found:
            note = "failing runs the group test could not explain (flaky?)"
            break
        culprits += found
        worst.update(verdicts)
        failing_together = together()
        if failing_together is not None and rounds_done >= len(schedule) and len(remaining()) <= PAIR_ROUNDS_UP_TO:
            note = "every pair covered and the remaining hosts still fail together"
            break
    complete = failing_together is None and not note
    exclude = _exclude(culprits)
    verdicts = _verdicts(hosts, culprits, worst, unresolved, rr.evidence)
    if unresolved:
        note = "; ".join(filter(None, [note, "unresolved alone: " + ",".join(unresolved)]))
    return HostBisectResult(hosts, verdicts, culprits, exclude, rr.rounds, rr.runs, complete and not unresolved, rr.evidence, note)


_CODES = {OK: "pass", FAILING: "fail", SLOW: "fail", UNRESOLVED: "unresolved"}


def _group_all(rest: list[str], rr: _Rounds, seed: int) -> tuple[list[tuple[str, ...]], dict]:
    """Group testing over all remaining hosts (they fail together, no pair did): S is run with an anchor."""
    from envmatrix.bisect import FAIL, PASS, find_culprits

    anchor, suspects = rest[0], rest[1:]
    seen: dict[frozenset, Evidence] = {}

    def oracle(atoms: frozenset) -> str:
        (e,) = rr([tuple(suspects[i] for i in sorted(atoms)) + (anchor,)])
        seen[atoms] = e
        return _CODES[e.verdict]

    result = find_culprits(len(suspects), oracle, known={frozenset(): PASS, frozenset(range(len(suspects))): FAIL}, seed=seed)
    found, worst = [], {}
    for atoms in result.culprits:
        hosts = tuple(suspects[i] for i in sorted(atoms))
        if len(hosts) == 1 and len(suspects) > 1:
            # "fails with the anchor": a bad host, or the link between it and the anchor. A second partner tells.
            other = next(h for h in suspects if h != hosts[0])
            (e,) = rr([(hosts[0], other)])
            if e.verdict == OK:
                hosts = tuple(sorted((hosts[0], anchor)))
        found.append(hosts)
        shown = [e.verdict for a, e in seen.items() if atoms <= a]
        worst[hosts] = FAILING if FAILING in shown else SLOW if SLOW in shown else FAILING
    return found, worst


def _group_test(suspects, anchors, rr, failing, pair_outcome, seed):
    """Culprit sets among ``suspects`` (hosts of the failing pairs) and the worst verdict that showed each."""
    from envmatrix.bisect import FAIL, PASS, find_culprits

    index = {h: i for i, h in enumerate(suspects)}
    code = _CODES
    seen: dict[frozenset, Evidence] = {}
    # One round: every suspect with its own anchor, all at once (as many as there are anchors).
    groups = [(s, a) for s, a in zip(suspects, anchors)]
    for (s, _), e in zip(groups, rr(groups)):
        seen[frozenset({index[s]})] = e
    known = {frozenset(): PASS, frozenset(range(len(suspects))): FAIL}
    for atoms, e in seen.items():
        known[atoms] = code[e.verdict]
    for g in failing:  # a failing pair plus a good anchor still fails (monotone)
        known.setdefault(frozenset(index[h] for h in g), FAIL)

    def oracle(atoms: frozenset) -> str:
        (e,) = rr([tuple(suspects[i] for i in sorted(atoms)) + (anchors[0],)])
        seen[atoms] = e
        return code[e.verdict]

    result = find_culprits(len(suspects), oracle, known=known, seed=seed)
    found, worst = [], {}
    for atoms in result.culprits:
        hosts = tuple(suspects[i] for i in sorted(atoms))
        found.append(hosts)
        shown = [e.verdict for a, e in seen.items() if atoms <= a] + [pair_outcome[g].verdict for g in failing if set(hosts) <= set(g)]
        worst[hosts] = FAILING if FAILING in shown else SLOW if SLOW in shown else FAILING
    return found, worst


def _exclude(culprits: list[tuple[str, ...]]) -> list[str]:
    """Every bad host, and one end of each bad link not already covered (the end in the most culprit sets)."""
    out = [c[0] for c in culprits if len(c) == 1]
    for c in culprits:
        if len(c) > 1 and not set(c) & set(out):
            counts = {h: sum(h in d for d in culprits) for h in c}
            out.append(max(c, key=lambda h: (counts[h], h)))
    return list(dict.fromkeys(out))


def _verdicts(hosts, culprits, worst, unresolved, evidence) -> dict[str, HostVerdict]:
    out = {}
    for h in hosts:
        mine = [e for e in evidence if h in e.hosts]
        sets = [c for c in culprits if h in c]
        if h in unresolved:
            out[h] = HostVerdict(h, UNRESOLVED, "unresolved alone", mine)
        elif not sets:
            out[h] = HostVerdict(h, OK, "", mine)
        else:
            status = FAILING if any(worst.get(c) == FAILING for c in sets) else SLOW
            why = "; ".join("fails alone" if c == (h,) and any(e.hosts == (h,) and e.verdict in _BAD for e in mine)
                            else f"{status} with any good partner" if len(c) == 1
                            else "link to " + ",".join(x for x in c if x != h) for c in sets)
            out[h] = HostVerdict(h, status, why, [e for e in mine if e.verdict != OK] or mine)
    return out


def parse_host_list(text: str, where: str) -> list[tuple[str, Optional[int]]]:
    """``host``, ``host N``, ``host:N`` or ``host slots=N`` lines (an MPI hostfile works); # comments."""
    from envmatrix.errors import ConfigError

    out: list[tuple[str, Optional[int]]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        host, slots = words[0], None
        if ":" in host:
            host, _, slots_text = host.partition(":")
            words = [host, slots_text, *words[1:]]
        rest = words[1:]
        if rest:
            value = rest[0].split("=", 1)[1] if rest[0].startswith(("slots=", "max_slots=")) else rest[0]
            if not value.isdigit() or int(value) < 1 or len(rest) > 1 and not rest[1].startswith("max_slots="):
                raise ConfigError(f"{where}:{number}: {raw.strip()!r} not understood; allowed: HOST, HOST N, HOST:N or HOST slots=N")
            slots = int(value)
        if any(h == host for h, _ in out):
            raise ConfigError(f"{where}:{number}: host {host!r} listed twice; list each host once")
        out.append((host, slots))
    if len(out) < 1:
        raise ConfigError(f"{where}: no hosts in it; give one host a line (HOST, HOST N or HOST slots=N)")
    return out
