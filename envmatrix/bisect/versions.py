"""Bisect an ordered list of NCCL library / net-plugin builds, with git-bisect semantics.

``versions`` is ordered old -> new; ``versions[0]`` is expected good and
``versions[-1]`` bad. ``test(version)`` answers "good", "bad" or "skip" (the
caller maps probe outcomes: pass -> good, exit 125 / unresolved -> skip, any other
failure -> bad; :func:`outcome_from_exit_code` does this for ``git bisect run``
style exit codes). As in git bisect, a skipped version next to the culprit
leaves the answer ambiguous: the result then lists every candidate.
"""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass, field
from typing import Callable, Sequence

from envmatrix.env.atoms import PREPEND, Atom
from envmatrix.errors import EXIT_FAILURES, EXIT_INCONCLUSIVE, EXIT_OK, ConfigError

__all__ = [
    "GOOD",
    "BAD",
    "SKIP",
    "MODES",
    "VersionBisectResult",
    "bisect_versions",
    "looks_like_shared_object",
    "max_tests",
    "outcome_from_exit_code",
    "parse_versions_file",
    "version_atoms",
]

GOOD, BAD, SKIP = "good", "bad", "skip"
OUTCOMES = (GOOD, BAD, SKIP)
MODES = ("auto", "preload", "library_path")


def looks_like_shared_object(path: str) -> bool:
    """``libnccl.so`` or ``libnccl.so.2.21.5`` (decided from the string only)."""
    if path.endswith("/"):
        return False
    name = posixpath.basename(path)
    return name.endswith(".so") or ".so." in name


def version_atoms(path: str, mode: str) -> tuple[Atom, ...]:
    """The atoms that make a process load ``path``.

    ``preload``: ``LD_PRELOAD`` prepend of the .so file; ``library_path``:
    ``LD_LIBRARY_PATH`` prepend of the directory (a .so file's directory when a
    file is given); ``auto``: preload for a .so-looking string, else library_path.
    Pure: the filesystem is not consulted.
    """
    if mode not in MODES:
        raise ConfigError(f"version mode {mode!r} unknown; allowed: {', '.join(MODES)}")
    if not path or path != path.strip():
        raise ConfigError(f"version path {path!r}: empty or surrounded by spaces; allowed: a .so file or a directory")
    if ":" in path:
        raise ConfigError(f"version path {path!r} contains ':'; allowed: one .so file or one directory per version")
    is_so = looks_like_shared_object(path)
    if mode == "auto":
        mode = "preload" if is_so else "library_path"
    if mode == "preload":
        if not is_so:
            raise ConfigError(
                f"version path {path!r} is not a shared object for mode preload; "
                "allowed: a file ending in .so or containing .so. (e.g. libnccl.so.2), or use mode library_path"
            )
        return (Atom("LD_PRELOAD", PREPEND, path),)
    directory = posixpath.dirname(path) if is_so else path
    if not directory:
        raise ConfigError(f"version path {path!r} has no directory for mode library_path; allowed: a directory path")
    return (Atom("LD_LIBRARY_PATH", PREPEND, directory),)


def parse_versions_file(text: str, where: str = "versions file") -> list[str]:
    """One path per line, oldest first; blank lines and ``#`` comments (full line or after whitespace) ignored."""
    versions: list[str] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        for sep in (" #", "\t#"):
            if sep in line:
                line = line.split(sep, 1)[0].rstrip()
        if line in seen:
            raise ConfigError(
                f"{where}:{lineno}: {line!r} is already listed on line {seen[line]}; "
                "allowed: each version once, oldest first"
            )
        seen[line] = lineno
        versions.append(line)
    if len(versions) < 2:
        raise ConfigError(
            f"{where}: {len(versions)} version(s) listed; allowed: at least 2 paths, one per line, oldest (good) first"
        )
    return versions


def outcome_from_exit_code(code: int) -> str:
    """``git bisect run`` convention: 0 good, 125 skip, 1..127 bad; anything else aborts (ValueError)."""
    if code == 0:
        return GOOD
    if code == 125:
        return SKIP
    if 1 <= code <= 127:
        return BAD
    raise ValueError(f"exit code {code} aborts the bisect (git bisect run: 0 good, 1-127 bad except 125 skip)")


def max_tests(n: int) -> int:
    """Tests needed without skips: both ends plus a binary search, at most ceil(log2(n)) + 2."""
    return 2 + math.ceil(math.log2(n - 1)) if n >= 2 else 1


@dataclass
class VersionBisectResult:
    first_bad: str | None
    last_good: str | None
    candidates: list[str] = field(default_factory=list)
    ambiguous: bool = False
    tested: list[tuple[str, str]] = field(default_factory=list)
    message: str = ""

    @property
    def skipped(self) -> list[str]:
        return [v for v, o in self.tested if o == SKIP]

    @property
    def exit_code(self) -> int:
        """The project convention: 1 a first bad version named, 0 no regression (the last version is good),
        3 anything else (several candidates around skipped versions, an end skipped, versions[0] already bad)."""
        if self.first_bad is not None:
            return EXIT_FAILURES
        if self.last_good is not None and self.tested and self.tested[-1] == (self.last_good, GOOD) and not self.candidates:
            return EXIT_OK
        return EXIT_INCONCLUSIVE

    def to_json(self) -> dict:
        return {
            "first_bad": self.first_bad,
            "last_good": self.last_good,
            "candidates": list(self.candidates),
            "ambiguous": self.ambiguous,
            "tested": [list(t) for t in self.tested],
            "message": self.message,
        }


def bisect_versions(versions: Sequence[str], test: Callable[[str], str]) -> VersionBisectResult:
    """Find the first bad version; see the module docstring.

    The ends are tested first (``versions[0]`` must be good, ``versions[-1]``
    bad), then the interval (last good, first bad) is halved. When the middle is
    skipped, the nearest untested version inside the interval is tried instead,
    alternating sides (after, before, two after, ...). No version is tested
    twice. Without skips this takes at most ``max_tests(len(versions))`` tests.

    If an end cannot be tested ("skip") there is no known good/bad reference and
    the result says so (``first_bad`` None, no candidates).
    """
    versions = list(versions)
    if len(versions) < 2:
        raise ValueError(f"bisect_versions needs at least 2 versions, got {len(versions)}")
    if len(set(versions)) != len(versions):
        dup = next(v for i, v in enumerate(versions) if v in versions[:i])
        raise ValueError(f"version {dup!r} is listed twice")

    cache: dict[int, str] = {}
    tested: list[tuple[str, str]] = []

    def run(i: int) -> str:
        if i in cache:  # never reached by the search below; kept as a guard
            return cache[i]
        outcome = test(versions[i])
        if outcome not in OUTCOMES:
            raise ValueError(f"test({versions[i]!r}) returned {outcome!r}; allowed: good, bad, skip")
        cache[i] = outcome
        tested.append((versions[i], outcome))
        return outcome

    def result(first_bad, last_good, candidates, message) -> VersionBisectResult:
        return VersionBisectResult(
            first_bad=first_bad,
            last_good=last_good,
            candidates=list(candidates),
            ambiguous=len(candidates) > 1,
            tested=tested,
            message=message,
        )

    first, last = versions[0], versions[-1]
    start = run(0)
    if start == BAD:
        return result(None, None, [], f"versions[0] is already bad: nothing to bisect ({first})")
    if start == SKIP:
        return result(None, None, [], f"versions[0] could not be tested (skip): no known good version ({first})")
    end = run(len(versions) - 1)
    if end == GOOD:
        return result(None, last, [], f"last version is good: no regression ({last})")
    if end == SKIP:
        return result(None, first, [], f"last version could not be tested (skip): no known bad version ({last})")

    lo, hi = 0, len(versions) - 1  # invariant: lo good, hi bad
    while True:
        pick = _next_probe(lo, hi, cache)
        if pick is None:
            break
        outcome = run(pick)
        if outcome == GOOD:
            lo = pick
        elif outcome == BAD:
            hi = pick
    skipped_between = [versions[i] for i in range(lo + 1, hi)]  # all skipped once the loop ends
    candidates = skipped_between + [versions[hi]]
    if not skipped_between:
        return result(versions[hi], versions[lo], candidates, f"first bad version: {versions[hi]} (last good: {versions[lo]})")
    return result(
        None,
        versions[lo],
        candidates,
        f"first bad is one of: {', '.join(candidates)} (skipped: {', '.join(skipped_between)}; "
        f"last good: {versions[lo]})",
    )


def _next_probe(lo: int, hi: int, cache: dict[int, str]) -> int | None:
    """The untested index in (lo, hi) nearest the middle, trying after then before it."""
    if hi - lo < 2:
        return None
    mid = (lo + hi) // 2
    for step in range(0, hi - lo):
        for i in ((mid,) if step == 0 else (mid + step, mid - step)):
            if lo < i < hi and i not in cache:
                return i
    return None
