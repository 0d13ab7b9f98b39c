"""Host bisect: which hosts, and which host pairs, make a multi-host run fail or slow; pure.

The caller gives ``run_round``: it runs every host group of a round AT THE SAME TIME (the groups are
disjoint) and answers one verdict per group (``ok``, ``failing``, ``slow``, ``unresolved``). A culprit is a
host (bad alone, or bad only with a partner: a slow NIC shows only between hosts) or a host pair (a bad
link). The search decodes every round's evidence (a group that passed clears its hosts and pairs):

1. pairs: every host with a host of the other half (a round-robin's first round; with N odd the host that
   sits out joins the last pair). Any single bad host, of either kind, makes its pair fail in round 1.
   (Each host alone first would expose only hosts bad alone; one slow only with partners cost a round more.)
2. the hosts of failing pairs, each with its own known-good anchor (a host of a passing pair), all in one
   round: a suspect failing with a good anchor is a bad host (bad with two partners); a failing pair whose
   two ends both pass with anchors is a bad link. With no passing pair, each suspect runs alone and further
   round-robin rounds look for one.
3. every culprit host alone (does it fail alone?) and all other hosts together, in one round: when they
   pass, the exclude list is proven to leave a healthy set and the search ends. When they fail (a bad link no
   pair covered), a split search runs the halves of the failing set at once; when both pass, the culprit
   pair crosses them, and the halves of each side are run two combinations at a time (A1+B1 with A2+B2, then
   A1+B2 with A2+B1) down to one pair. A failing set that no host or pair explains (an interaction of three
   or more hosts) goes to the culprit search that finds culprit variables (``envmatrix.bisect.find_culprits``).

So one bad host among any N costs 3 rounds, wherever it sits and whatever its kind, and a healthy cluster 2.

Slow is relative when the runs measure (``relative=True``, each group's ``figure`` its bandwidth): rounds 1 and 2
are then the pair test's rounds (planning/pairs.py; a host of an odd count sits one out), judged by
judgement/pairs.py: each pair against the other pairs of its round, each host against its own pairs. Pair rounds go on
until every host has played and each host with no fine pair has two bad pairs with partners fine elsewhere;
a slow pair no slow host explains is measured once more (judged against the median of every pair): a slow link is
slow every time, a pair slowed once by a busy machine is not. A pair's verdict is then slow when every one of its
measurements was, and the search above convicts a host whose every pair is slow with partners fine elsewhere.
With 3 hosts every round is one pair, judged against the median of the other two: all three pairs run, and a
slow host's pairs are named only below (1 - tolerance) / (1 + tolerance) of the fine pair (1/7 at the default).
Rounds whose pairs are mostly slow (two slow hosts among four or six) have a slow median and hide them: a limit.
Verdicts are monotone (adding a bad host or both ends of a bad link to a group keeps it failing); a fault
seen only in a one-host run (e.g. a slow intra-node path hidden behind the network in every multi-host
run) is not searched for: sweep each host on its own (``hosts=[HOST] grids=[1xP]``) for that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from envmatrix.judgement.pairs import PairFigure, PairsJudgement, exclude_line, judge_pairs
from envmatrix.planning.hostlist import parse_host_list  # noqa: F401  (bisect --hosts reads its file with it)
from envmatrix.planning.pairs import host_pair_rounds

OK, FAILING, SLOW, UNRESOLVED = "ok", "failing", "slow", "unresolved"
VERDICTS = (OK, FAILING, SLOW, UNRESOLVED)
_BAD = (FAILING, SLOW)
# A pair is slow below a quarter of its round's other pairs' median: on two cores at load 20 a healthy pair once measured 8x
# below its round and 2x below every pair's median on its recheck (benchmarks/host_bisect_slow.md: at half it was
# named a slow link); a 20 Mbit/s link sits 25-100x below.
PAIR_TOLERANCE = 0.75


@dataclass(frozen=True)
class Evidence:
    round: int
    hosts: tuple[str, ...]
    verdict: str
    run: str = ""  # where the run's result lives (run key / result dir), for the report
    figure: Optional[float] = None  # its bandwidth (GB/s) when it ran and measured one


RunRound = Callable[[int, list[tuple[str, ...]]], list[Evidence]]


def round_robin(n: int) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint pairs covering every pair of 0..n-1 once (circle method): n-1 rounds, n when odd.
    The first round pairs each of the first half with one of the second half."""
    return host_pair_rounds(n) if n >= 2 else []  # the pair test's schedule (planning/pairs.py)


def first_round(n: int) -> list[tuple[int, ...]]:
    """Round 1's groups: round_robin's first round, the host sitting out (N odd) added to the last pair."""
    if n < 2:
        return [(0,)] if n else []
    groups: list[tuple[int, ...]] = list(round_robin(n)[0])
    if n % 2:
        (sitting,) = set(range(n)) - {i for g in groups for i in g}
        groups[-1] = tuple(sorted(groups[-1] + (sitting,)))
    return groups


@dataclass
class HostVerdict:
    host: str
    status: str  # ok / failing / slow / unresolved
    why: str  # "fails alone", "slow with any good partner", "link to node3", ...
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
    pairs: Optional[PairsJudgement] = None  # the pair rounds' judgement (relative slowness), when they measured

    @property
    def exclude_line(self) -> str:
        return exclude_line(self.exclude)

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


def localise(hosts: Sequence[str], run_round: RunRound, seed: int = 0, relative: bool = False,
             pair_tolerance: float = PAIR_TOLERANCE) -> HostBisectResult:
    """The culprit hosts and host pairs of ``hosts`` (see the module docstring). ``relative``: the groups'
    figures judge slowness in pair rounds (3 hosts or more; 2 make one pair, with nothing to compare it with)."""
    search = _Search(list(dict.fromkeys(hosts)), run_round, seed)
    search.pair_tolerance = pair_tolerance if relative and len(search.hosts) >= 3 else None
    complete = search.run()
    hosts, rr, culprits = search.hosts, search.rr, search.culprits
    worst = {c: _worst(c, rr.evidence) for c in culprits}
    verdicts = _verdicts(hosts, culprits, worst, search.unresolved, rr.evidence)
    if search.pairs is not None:
        _explain_slow_hosts(verdicts, search.pairs)
    if search.unresolved:
        search.notes.append("unresolved: " + ",".join(search.unresolved))
    return HostBisectResult(hosts, verdicts, culprits, _exclude(culprits), rr.rounds, rr.runs,
                            complete and not search.notes, rr.evidence, "; ".join(search.notes), search.pairs)


class _Search:
    def __init__(self, hosts: list[str], run_round: RunRound, seed: int) -> None:
        self.hosts, self.rr, self.seed = hosts, _Rounds(run_round), seed
        self.culprits: list[tuple[str, ...]] = []
        self.unresolved: list[str] = []
        self.notes: list[str] = []
        self.pair_tolerance: Optional[float] = None  # set: slowness judged relatively in pair rounds
        self.measured: list[tuple[int, PairFigure]] = []  # (evidence index, figure) of the pair rounds
        self.pairs: Optional[PairsJudgement] = None

    # --- what the evidence so far says -------------------------------------------------------------
    def known_ok(self, group: Sequence[str]) -> bool:
        g = set(group)
        return any(e.verdict == OK and g <= set(e.hosts) for e in self.rr.evidence)

    def known_bad(self, group: Sequence[str]) -> bool:
        g = set(group)
        return any(e.verdict in _BAD and set(e.hosts) <= g for e in self.rr.evidence)

    def cleared(self, host: str) -> bool:
        """Passed in a group of two or more hosts: neither bad alone nor bad with partners."""
        return any(e.verdict == OK and len(e.hosts) > 1 and host in e.hosts for e in self.rr.evidence)

    def explained(self, group: Sequence[str]) -> bool:
        g = set(group)
        return bool(g & set(self.unresolved)) or any(set(c) <= g for c in self.culprits)

    def _add(self, hosts: Sequence[str]) -> None:
        culprit = tuple(h for h in self.hosts if h in set(hosts))
        if culprit not in self.culprits:
            self.culprits.append(culprit)

    # --- the search ----------------------------------------------------------------------------------
    def run(self) -> bool:
        """True when the remaining hosts were shown to pass together."""
        if self.pair_tolerance is not None:
            self._pair_rounds()
            return self._search_from_round_one()
        idx = first_round(len(self.hosts))
        if len(self.hosts) < 2:
            for e in self.rr([tuple(self.hosts[i] for i in g) for g in idx]):
                if e.verdict in _BAD:
                    self._add(e.hosts)
            return True
        for e in self.rr([tuple(self.hosts[i] for i in g) for g in idx]):
            if e.verdict == UNRESOLVED and len(self.hosts) == len(e.hosts):
                self.unresolved += list(e.hosts)  # nothing else to test them against
        return self._search_from_round_one()

    def _search_from_round_one(self) -> bool:
        self._resolve_suspects()
        unexplained = [tuple(e.hosts) for e in self.rr.evidence if e.verdict in _BAD and not self.explained(e.hosts)]
        self._link_search(_disjoint_minimal(unexplained))
        return self._confirm()

    # --- relative slowness: the pair test's rounds -----------------------------------------------------
    def _pair_rounds(self) -> None:
        """Rounds of the pair schedule until every host played and each host of a bad pair has two pairs; then
        each slow pair no slow host explains once more; every pair's verdict relabelled from the judgement."""
        schedule = round_robin(len(self.hosts))
        # Rounds of one pair (3 hosts) are each judged against the other pairs, and a slow host is in two of the
        # three: until the third pair ran, its two slow pairs are each other's reference and both look fine.
        every_pair = all(len(pairs) == 1 for pairs in schedule)
        for pairs in schedule:
            self._measure([(self.hosts[a], self.hosts[b]) for a, b in pairs], alone=False)
            self._relabel()
            if not every_pair and self._pairs_enough():
                break
        again = _disjoint([link for link in self.pairs.slow_links if self._measurements(link) == 1]) if self.pairs else []
        if again:
            self._measure(again, alone=True)
            self._relabel()

    def _measure(self, groups: list[tuple[str, ...]], alone: bool) -> None:
        """Run ``groups`` as one round and keep their figures: ``alone`` judges each against every pair's median
        (a recheck round of slow pairs has no healthy median of its own)."""
        start = len(self.rr.evidence)
        for i, e in enumerate(self.rr(groups)):
            if e.figure is not None and e.verdict in (OK, SLOW):
                key = 1000 * e.round + i if alone else e.round  # a round of its own per rechecked pair
                self.measured.append((start + i, PairFigure(key, e.hosts[0], e.hosts[1], e.figure)))

    def _relabel(self) -> None:
        if not self.measured:
            return
        self.pairs = judge_pairs([f for _, f in self.measured], self.pair_tolerance)
        slow_every_time: dict[frozenset, bool] = {}
        for v in self.pairs.pairs:
            key = frozenset((v.figure.a, v.figure.b))
            slow_every_time[key] = slow_every_time.get(key, True) and v.slow
        for index, f in self.measured:
            e = self.rr.evidence[index]
            self.rr.evidence[index] = Evidence(e.round, e.hosts, SLOW if slow_every_time[frozenset((f.a, f.b))] else OK,
                                               e.run, e.figure)

    def _measurements(self, pair: Sequence[str]) -> int:
        return sum(set(pair) == set(e.hosts) for e in self.rr.evidence)

    def _pairs_enough(self) -> bool:
        """Every host played, and each host with no fine pair has two bad pairs with partners fine elsewhere: a
        partner of the slow host whose other pair was slowed once by load has one, and plays on."""
        if not {h for e in self.rr.evidence for h in e.hosts} >= set(self.hosts):
            return False
        for host in self.hosts:
            bad = [e for e in self.rr.evidence if host in e.hosts and e.verdict != OK]
            if bad and not self.cleared(host):
                if sum(all(self.cleared(o) for o in e.hosts if o != host) for e in bad) < 2:
                    return False
        return True

    def _pool(self) -> list[str]:
        return [h for h in self.hosts if h not in self.unresolved and (h,) not in self.culprits]

    def _resolve_suspects(self, defer: bool = True) -> None:
        """Round 2: clear or convict every host not yet seen passing with a partner. With ``defer``, a host
        whose every failing group holds another culprit waits for round 3 (the rest together clears it)."""
        schedule, matching, alone_done = round_robin(len(self.hosts)), 0, False
        while True:
            for h in [h for h in self._pool() if not self.cleared(h) and self._convicted(h)]:  # decided together
                self._add((h,))
            suspects = [h for h in self._pool() if not self.cleared(h) and not (defer and self._explained_by_others(h))]
            if not suspects:
                return
            pairs = self._with_anchors(suspects, [h for h in self._pool() if self.cleared(h)])
            if pairs:
                for (suspect, _), e in zip(pairs, self.rr(pairs)):
                    if e.verdict == UNRESOLVED:
                        self.unresolved.append(suspect)
                continue
            # No pair passed: hosts that fail alone first, then other pairings, until one passes.
            if not alone_done:
                alone_done = True
                self.rr([(h,) for h in suspects if not self._tried((h,))])
                continue
            pool = self._pool()
            while matching < len(schedule):
                groups = [(self.hosts[a], self.hosts[b]) for a, b in schedule[matching]
                          if self.hosts[a] in pool and self.hosts[b] in pool and not self._tried((self.hosts[a], self.hosts[b]))]
                matching += 1
                if groups:
                    self.rr(groups)
                    break
            else:
                if len(pool) < 2:
                    return  # one host left, fine alone: nothing to pair it with
                if len(pool) == 2 and self.known_bad(pool):
                    self._add(pool)  # two hosts, each fine alone, failing together: the pair is all one can say
                else:
                    self.notes.append("no two hosts passed together: no known-good host to test the others against")
                    self.unresolved += [h for h in pool if not self.cleared(h)]
                return

    def _explained_by_others(self, host: str) -> bool:
        groups = [set(e.hosts) for e in self.rr.evidence if host in e.hosts and len(e.hosts) > 1]
        return all(self.explained(g - {host}) for g in groups)

    def _convicted(self, host: str) -> bool:
        """A bad host: it failed alone, or failed with a known-good partner and no one partner is in all its
        failing groups (one bad link would be). Groups another bad host explains say nothing about it."""
        failed = [set(e.hosts) - {host} for e in self.rr.evidence if e.verdict in _BAD and host in e.hosts]
        failed = [others for others in failed if not any((h,) in self.culprits for h in others)]
        with_good = [others for others in failed if all(self.cleared(h) for h in others)]
        return bool(with_good) and not set.intersection(*failed)

    def _with_anchors(self, suspects: list[str], anchors: list[str]) -> list[tuple[str, str]]:
        """Each suspect with its own anchor not tried with it before, one it never failed with when there is
        one (a pass clears the suspect, a failure convicts it)."""
        pairs, free = [], list(anchors)
        for suspect in suspects:
            fresh = [a for a in free if not self._tried((suspect, a))]
            unseen = [a for a in fresh if not any(e.verdict in _BAD and {suspect, a} <= set(e.hosts) for e in self.rr.evidence)]
            if unseen or fresh:
                anchor = (unseen or fresh)[0]
                free.remove(anchor)
                pairs.append((suspect, anchor))
        return pairs

    def _tried(self, group: Sequence[str]) -> bool:
        return any(set(e.hosts) == set(group) for e in self.rr.evidence)

    def _confirm(self) -> bool:
        """Round 3: culprit hosts alone, the rest together; a failing rest is searched again."""
        for _ in range(len(self.hosts)):
            exclude = _exclude(self.culprits)
            rest = tuple(h for h in self.hosts if h not in exclude and h not in self.unresolved)
            if len(rest) < 2 or self.known_ok(rest):
                return True
            alone = [c for c in self.culprits if len(c) == 1 and not self._tried(c)]
            *_, together = self.rr(alone + [rest])
            if together.verdict == OK:
                return True
            if together.verdict == UNRESOLVED:
                self.notes.append("the remaining hosts together: unresolved")
                return False
            if any(not self.cleared(h) for h in rest):  # deferred suspects first: they may be the reason
                self._resolve_suspects(defer=False)
                continue
            if not self._link_search([rest]):
                self.notes.append("the remaining hosts fail together and no host or host pair explains it")
                return False
        self.notes.append("the remaining hosts still fail together after as many searches as hosts")
        return False

    # --- finding bad links in failing sets of cleared hosts ------------------------------------------
    def _link_search(self, failing: list[tuple[str, ...]]) -> int:
        """Culprits inside each failing set, the sets searched side by side; how many were found."""
        before = len(self.culprits)
        tasks: list[tuple] = [("inside", s) for s in failing]
        while tasks:
            queue, waiting, groups = list(tasks), [], []
            while queue:
                task = queue.pop(0)
                wants, replaced = self._advance(task)
                queue += replaced
                if wants:
                    if any(self._tried(g) for g in wants):  # ran and came back unresolved: no verdict to go on
                        self.notes.append(f"{','.join(wants[0])}: unresolved; the search there stopped")
                        continue
                    groups += wants
                    waiting.append(task)
            self.rr(groups)
            tasks = waiting
        return len(self.culprits) - before

    def _advance(self, task: tuple) -> tuple[list[tuple[str, ...]], list[tuple]]:
        """(groups the task needs run now, tasks that replace it without a run). ``inside R``: R fails;
        ``cross A B``: A and B each pass, A+B fails, so a culprit pair has one end in each."""
        if task[0] == "inside":
            group = task[1]
            if len(group) <= 2:
                self._add(group)
                return [], []
            a, b = _halves(group)
            bad = [p for p in (a, b) if len(p) > 1 and self.known_bad(p)]
            if bad:
                return [], [("inside", p) for p in bad]
            untested = [p for p in (a, b) if len(p) > 1 and not self.known_ok(p)]
            return (untested, []) if untested else ([], [("cross", a, b)])
        if task[0] == "more":
            self._higher_order(task[1])
            return [], []
        a, b = task[1], task[2]
        if len(a) == 1 and len(b) == 1:
            self._add(a + b)
            return [], []
        combos = [(x, y) for x, y in _combinations(a, b) if not self.known_ok(x + y)]
        bad = _disjoint([x + y for x, y in combos if self.known_bad(x + y)])
        if bad:
            return [], [("cross", *next((x, y) for x, y in combos if x + y == g)) for g in bad]
        if not combos:
            return [], [("more", a + b)]
        if len(combos) == 1:  # the only combination not seen passing holds the pair
            return [], [("cross", *combos[0])]
        return _disjoint([x + y for x, y in combos]), []

    def _higher_order(self, group: tuple[str, ...]) -> None:
        """A failing set whose every host and pair passes: the culprit search for interacting sets, one run a round."""
        from envmatrix.bisect import FAIL, PASS, find_culprits

        def oracle(atoms: frozenset) -> str:
            (e,) = self.rr([tuple(group[i] for i in sorted(atoms))])
            return _CODES[e.verdict]

        known = {frozenset(): PASS, frozenset(range(len(group))): FAIL}
        known.update({frozenset({i}): PASS for i in range(len(group))})
        for atoms in find_culprits(len(group), oracle, known=known, seed=self.seed).culprits:
            self._add(tuple(group[i] for i in sorted(atoms)))


_CODES = {OK: "pass", FAILING: "fail", SLOW: "fail", UNRESOLVED: "unresolved"}


def _halves(group: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    half = (len(group) + 1) // 2
    return group[:half], group[half:]


def _combinations(a: tuple[str, ...], b: tuple[str, ...]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The halves of A with the halves of B, the two disjoint 'diagonal' combinations first."""
    a1, a2 = _halves(a) if len(a) > 1 else (a, ())
    b1, b2 = _halves(b) if len(b) > 1 else (b, ())
    return [(x, y) for x, y in ((a1, b1), (a2, b2), (a1, b2), (a2, b1)) if x and y]


def _disjoint(groups: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The groups, in order, that share no host with an earlier chosen one (a round's groups are disjoint)."""
    out, used = [], set()
    for g in groups:
        if not used & set(g):
            out.append(g)
            used |= set(g)
    return out


def _disjoint_minimal(groups: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Failing groups to search, smallest first, none containing another or sharing a host with one chosen."""
    groups = sorted(dict.fromkeys(groups), key=len)
    return _disjoint([g for g in groups if not any(set(o) < set(g) for o in groups)])


def _worst(culprit: tuple[str, ...], evidence: list[Evidence]) -> str:
    shown = [e.verdict for e in evidence if set(culprit) <= set(e.hosts) and e.verdict in _BAD]
    return SLOW if shown and FAILING not in shown else FAILING


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
            out[h] = HostVerdict(h, UNRESOLVED, "unresolved", mine)
        elif not sets:
            out[h] = HostVerdict(h, OK, "", mine)
        else:
            status = FAILING if any(worst.get(c) == FAILING for c in sets) else SLOW
            alone = next((e.verdict for e in mine if e.hosts == (h,)), OK)
            why = "; ".join(("fails alone" if alone == FAILING else "slow alone") if c == (h,) and alone in _BAD
                            else f"{status} with any good partner" if len(c) == 1
                            else "link to " + ",".join(x for x in c if x != h) for c in sets)
            out[h] = HostVerdict(h, status, why, [e for e in mine if e.verdict != OK] or mine)
    return out


def _explain_slow_hosts(verdicts: dict[str, HostVerdict], judgement: PairsJudgement) -> None:
    """A host convicted slow by the pair rounds says how sure: its slow pairs of all its pairs, how many pairs
    without it were slow, and the margin: the lowest ratio to its round of any fine pair over its own highest."""
    fine = [v.ratio for v in judgement.pairs if not v.slow]
    for judged in judgement.hosts:
        verdict = verdicts.get(judged.host)
        if verdict is None or verdict.status != SLOW or verdict.why != "slow with any good partner":
            continue
        mine = [v.ratio for v in judgement.pairs if judged.host in (v.figure.a, v.figure.b)]
        margin = f", margin {min(fine) / max(mine):.1f}x" if fine and max(mine) > 0 else ""
        verdict.why = (f"slow in {judged.slow_pairs} of {judged.pairs} of its pairs, median {judged.median_ratio:.2f}x "
                       f"of its rounds' median ({judged.certainty}{margin})")
