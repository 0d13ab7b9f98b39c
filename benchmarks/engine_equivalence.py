"""Compare the matrices of two sweep run dirs (old code vs new code): issue 18's "behaviour is unchanged".

    python benchmarks/engine_equivalence.py /tmp/eqv/old.default /tmp/eqv/new.default

Per (setup, grid) it compares the cell symbol, the outcome class, the sorted per-rank (outcome, killed_by, signal, exit code) and the
normalised root-cause line from each dir's results.json; timings, pids, ports and paths are not compared
(they differ run to run). Exit 0 when every cell agrees, 1 on any outcome difference, 2 on a bad dir.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# Run-to-run noise in a root-cause line: temp paths, pids, ports, addresses, durations.
_NOISE = [
    (re.compile(r"/\S+"), "<path>"),
    (re.compile(r"\b\d+\.\d+\.\d+\.\d+(:\d+)?\b"), "<addr>"),
    (re.compile(r"\b\d+(\.\d+)?\s*(s|ms)\b"), "<dur>"),
    (re.compile(r"\b(pid|port)\s*[=:]?\s*\d+", re.I), r"\1 <n>"),
]


RANK_FIELDS = ("outcome", "killed_by", "signal", "exit_code")
FIELDS = ("symbol", "outcome", "ranks", "root_cause", "cause_rank")


def normalise(line: str | None) -> str:
    if not line:
        return ""
    for pattern, replacement in _NOISE:
        line = pattern.sub(replacement, line)
    return " ".join(line.split())


def cells(run_dir: Path) -> dict[tuple[str, str], dict[str, object]]:
    path = run_dir / "results.json"
    if not path.is_file():
        raise SystemExit(f"envmatrix-equivalence: {path} not found; pass a sweep's --out dir")
    report = json.loads(path.read_text())
    out: dict[tuple[str, str], dict[str, object]] = {}
    for result in report["results"]:
        setup, grid = result["setup"]["name"], result["grid"]
        root = result.get("root_cause") or {}
        out[(setup, grid)] = {
            "symbol": report["matrix"].get(grid, {}).get(setup),
            "outcome": result["outcome"],
            "ranks": tuple(sorted(tuple(str(r.get(f)) for f in RANK_FIELDS) for r in result.get("ranks", []))),
            "root_cause": normalise(root.get("line")),
            "cause_rank": root.get("rank"),
        }
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: engine_equivalence.py OLD_RUN_DIR NEW_RUN_DIR", file=sys.stderr)
        return 2
    old, new = (cells(Path(a)) for a in argv)
    differences = 0
    print("| setup | grid | old | new | root cause (old / new) |\n| --- | --- | --- | --- | --- |")
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        same = a is not None and b is not None and all(a[f] == b[f] for f in FIELDS)
        differences += not same
        show = lambda c: "missing" if c is None else f"{c['symbol']} {c['outcome']}"  # noqa: E731
        cause = lambda c: "" if c is None or not c["root_cause"] else f"rank {c['cause_rank']}: {c['root_cause']}"  # noqa: E731
        causes = cause(a) if same else f"{cause(a)} / {cause(b)}"
        print(f"| {key[0]} | {key[1]} | {show(a)} | {show(b)} | {causes}{'' if same else ' **DIFFERS**'} |")
    print(f"{len(set(old) | set(new))} cells compared, {differences} differ")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
