"""Env-delivery proof (pure): did every rank see the env it was meant to see?

Launchers that start ranks on other hosts (mpirun without ``-x``, srun with
pmix) can silently drop variables. Each rank reports what it really saw
(``rank{R}.env.json`` from the launcher shim, or the builtin probe's echoed
env); this module compares that with the plan's intended env per rank and
writes one precise line such as ``NCCL_NET_GDR_LEVEL missing on ranks 4-7``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from envmatrix.boundary import env_digest, is_echoed
from envmatrix.results import compress_ranks

IDENTITY_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NCCL_HOSTID")
MISSING, UNEXPECTED, VALUE, NO_REPORT, CORRUPT = "missing", "unexpected", "value", "no_report", "corrupt"


def checked_names(setup_vars: Iterable[str], pins: Iterable[str], intended: Sequence[Mapping[str, str]] = ()) -> tuple[str, ...]:
    """The names the check covers: the setup's variables, the safety pins and rank identity."""
    names = set(setup_vars) | set(pins)
    names |= {n for n in IDENTITY_VARS if any(n in env for env in intended)}
    return tuple(sorted(names))


def _on(ranks: Sequence[int]) -> str:
    return f"on rank{'s' if len(ranks) > 1 else ''} {compress_ranks(ranks)}"


def _short(value: str, limit: int = 60) -> str:
    text = value.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Mismatch:
    kind: str
    var: str
    expected: Optional[str]
    seen: Optional[str]
    ranks: tuple[int, ...]

    def describe(self) -> str:
        on = _on(self.ranks)
        if self.kind == MISSING:
            return f"{self.var} missing {on}"
        if self.kind == UNEXPECTED:
            return f"{self.var} set to {_short(self.seen or '')!r} {on} but the setup unsets it"
        if self.kind == VALUE:
            return f"{self.var}={_short(self.expected or '')} expected, {_short(self.seen or '')} seen {on}"
        if self.kind == CORRUPT:
            return f"env report digest does not match its content {on}"
        return f"no env report {on} (the launcher shim did not run there or ENVMATRIX_RESULT_DIR was not delivered)"


@dataclass(frozen=True)
class RankReport:
    """What one rank says it saw: ``env`` and the names it looked at beyond the echoed prefixes."""

    env: Mapping[str, str]
    checked: frozenset = frozenset()
    digest_ok: bool = True

    def observes(self, name: str) -> bool:
        return is_echoed(name) or name in self.checked

    @classmethod
    def from_shim(cls, data: Mapping[str, Any]) -> "RankReport":
        env = dict(data.get("env") or {})
        digest = data.get("sha256")
        return cls(env, frozenset(data.get("checked") or ()), digest is None or digest == env_digest(env))


def compare(
    intended: Sequence[Mapping[str, str]],
    reports: Mapping[int, Optional[RankReport]],
    names: Iterable[str],
    require_reports: bool = False,
) -> list[Mismatch]:
    """Mismatches grouped over ranks with the same (kind, var, expected, seen); in name order."""
    groups: dict[tuple, list[int]] = {}
    names = sorted(set(names))
    for rank, want in enumerate(intended):
        report = reports.get(rank)
        if report is None:
            if require_reports:
                groups.setdefault((NO_REPORT, "", None, None), []).append(rank)
            continue
        if not report.digest_ok:
            groups.setdefault((CORRUPT, "", None, None), []).append(rank)
        for name in names:
            if not report.observes(name):
                continue
            expected, seen = want.get(name), report.env.get(name)
            if expected == seen:
                continue
            kind = MISSING if seen is None else UNEXPECTED if expected is None else VALUE
            groups.setdefault((kind, name, expected, seen), []).append(rank)
    order = {NO_REPORT: 0, CORRUPT: 1, MISSING: 2, VALUE: 3, UNEXPECTED: 4}
    found = [Mismatch(k, v, e, s, tuple(r)) for (k, v, e, s), r in groups.items()]
    return sorted(found, key=lambda m: (order[m.kind], m.var, m.ranks))


def describe(mismatches: Sequence[Mismatch], limit: int = 4) -> str:
    """One line: the first few mismatches joined by '; '."""
    lines = [m.describe() for m in mismatches[:limit]]
    if len(mismatches) > limit:
        lines.append(f"{len(mismatches) - limit} more")
    return "; ".join(lines)


def delivery_problem(
    intended: Sequence[Mapping[str, str]],
    names: Iterable[str],
    shim_reports: Mapping[int, Optional[Mapping[str, Any]]],
    probe_envs: Mapping[int, Mapping[str, str]],
    require_reports: bool,
) -> tuple[Optional[str], Optional[int]]:
    """(one-line message, first rank involved) or (None, None) when every observed variable arrived.

    ``shim_reports`` are the parsed ``rank{R}.env.json`` files (preferred); ``probe_envs`` the envs a
    probe echoed itself (builtin ``rank{R}.json``). ``require_reports``: a rank without any report is
    a mismatch (launchers with a shim, when the run otherwise passed).
    """
    reports: dict[int, Optional[RankReport]] = {}
    for rank in range(len(intended)):
        shim = shim_reports.get(rank)
        if shim:
            reports[rank] = RankReport.from_shim(shim)
        elif probe_envs.get(rank):
            reports[rank] = RankReport(dict(probe_envs[rank]))
        else:
            reports[rank] = None
    found = compare(intended, reports, names, require_reports)
    if not found:
        return None, None
    return describe(found), min(found[0].ranks)
