"""Run-level verdict from rank results: the first observed failure is the root cause."""

from __future__ import annotations

import re
from typing import Sequence

from envmatrix.results import LAUNCH_ERROR, PASS, PEER_KILLED, TIMEOUT, UNRESOLVED, RankResult

# When ranks fail at the same instant, the more specific class explains more.
_SPECIFICITY = {LAUNCH_ERROR: 0, "launcher_error": 0, "wrong_result": 1, "init_error": 2, "collective_error": 3, "crash": 4, "exit_error": 5, UNRESOLVED: 6, TIMEOUT: 7}


# Failures that only say a peer went away: effects of another rank's failure, not causes.
_CONSEQUENCE = re.compile(
    r"retrieving ncclUniqueId from|Connection was likely closed|Connection reset by peer|Broken pipe|"
    r"Connection closed by peer|remote process exited|stopped after another rank failed",
    re.IGNORECASE,
)


def is_consequence(rank: RankResult) -> bool:
    return bool(_CONSEQUENCE.search(f"{rank.error or ''}\n{rank.root_cause_line or ''}"))


def verdict(ranks: Sequence[RankResult]) -> tuple[str, dict]:
    """(run outcome, root cause {rank, outcome, line, error})."""
    if ranks and all(r.outcome == PASS for r in ranks):
        return PASS, {}
    failed = [r for r in ranks if r.outcome not in (PASS, PEER_KILLED)]
    if not failed:
        failed = [r for r in ranks if r.outcome == PEER_KILLED] or list(ranks)
    if failed and all(r.outcome == TIMEOUT for r in failed):
        first = min(failed, key=lambda r: r.rank)
    else:
        failed = [r for r in failed if r.outcome != TIMEOUT] or failed
        first = min(
            failed,
            key=lambda r: (is_consequence(r), r.ended_at or float("inf"), _SPECIFICITY.get(r.outcome, 9), r.rank),
        )
    cause = {"rank": first.rank, "outcome": first.outcome, "line": first.root_cause_line or first.error, "error": first.error,
             "host": first.hostname}
    return first.outcome, cause
