"""Issue 39 point 9, measured: is a rate-limited host named alone by `envmatrix bisect --hosts`, and how sure?

Real namespace hosts (envmatrix.cluster: one network namespace per host on a bridge, reached by mpirun), gloo on
CPU, one rank per host, no expect: floors. Per trial: a cluster of N hosts; with ``--baseline`` first a host
bisect of the healthy hosts (where nothing may be named; it is the baseline); then one host's link capped with tc
(both ways), and `bisect --hosts` without a baseline and (``--baseline``) with it. ``--slow none``: healthy only. One JSON line per bisect (placement, exit code, culprits, the slow host's printed "why", rounds, seconds)
to stdout; the summary table with ``table FILE.jsonl``. Needs root, ip netns and mpirun.

    PYTHONPATH=$PWD python benchmarks/host_bisect_slow.py run --hosts 5 --slow node0,node2,node4 --rate 20mbit \
        --baseline >> /tmp/slow.jsonl
    python benchmarks/host_bisect_slow.py table /tmp/slow.jsonl
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

PROBE = {"timeout_s": 120, "bench": {"collectives": ["allreduce"], "min_bytes": "256K", "max_bytes": "256K",
                                     "iters": 20, "warmup": 2}}


def envmatrix(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envmatrix", *args], capture_output=True, text=True, timeout=timeout)


def one(n: int, slow: str, rate: str, baseline: bool, work: Path) -> list[dict]:
    from envmatrix import cluster as emulated

    cluster = emulated.up(n)
    rows = []
    try:
        conf = work / "c.yaml"
        conf.write_text(yaml.safe_dump(cluster.conf(grids=["1x1"], probe=PROBE)))
        hosts = cluster.hostfile(work / "hosts.txt", slots=1)
        runs: list[tuple[str, str, list[str]]] = []
        if baseline:  # the user: a host bisect of the healthy hosts first, then --baseline it
            runs.append(("none", "base", []))
        runs += [(slow, "plain", [])] + ([(slow, "with_baseline", ["--baseline", str(work / "base"), "--tolerance", "50%"])]
                                         if baseline else [])
        for culprit, name, args in runs:
            if culprit != "none" and name == "plain":  # after the healthy baseline, before the first bisect of it
                cluster.rate_limit(culprit, rate)
            out = work / name
            start = time.monotonic()
            proc = envmatrix("bisect", "--hosts", str(hosts), f"conf={conf}", "--grid", "1x1", "--out", str(out), *args)
            seconds = time.monotonic() - start
            report = json.loads((out / "host_bisect.json").read_text()) if (out / "host_bisect.json").exists() else {}
            verdict = report.get("verdicts", {}).get(culprit, {})
            rows.append({"hosts": n, "slow": culprit, "rate": rate, "baseline": bool(args), "exit": proc.returncode,
                         "culprits": report.get("culprits"),
                         "alone": report.get("culprits") == ([] if culprit == "none" else [[culprit]]),
                         "why": verdict.get("why"), "rounds": report.get("rounds"), "note": report.get("note"),
                         "seconds": round(seconds, 1), "stderr": proc.stderr[-300:] if proc.returncode not in (0, 1) else "",
                         "evidence": [(e["round"], e["hosts"], e["verdict"], e.get("gbps")) for e in report.get("evidence", [])]})
    finally:
        cluster.close()
    return rows


def table(path: str) -> str:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    out = ["| hosts | slow host | baseline | right answer | exit | rounds | seconds | how sure (printed) | note |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        wanted = "nothing named" if r["slow"] == "none" else "named alone"
        sure = (r["why"] or "-").split("(", 1)[-1].rstrip(")") if r["alone"] else f"culprits {r['culprits']}"
        note = (r["note"] or "").replace("fine pairs' median", "fine pairs").split(" (")[0]
        out.append(f"| {r['hosts']} | {r['slow']} | {'yes' if r['baseline'] else 'no'} | "
                   f"{wanted if r['alone'] else 'NO: ' + wanted} | {r['exit']} | {r['rounds']} | {r['seconds']} | {sure} | {note} |")
    slow = [r for r in rows if r["slow"] != "none"]
    healthy = [r for r in rows if r["slow"] == "none"]
    out.append(f"\nslow host named alone: {sum(r['alone'] for r in slow)} of {len(slow)} bisects; healthy cluster, "
               f"nothing named: {sum(r['alone'] for r in healthy)} of {len(healthy)}")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run")
    run.add_argument("--hosts", type=int, default=5)
    run.add_argument("--slow", default="node3", help="comma list: one trial per slow host placement")
    run.add_argument("--rate", default="20mbit")
    run.add_argument("--baseline", action="store_true", help="also bisect with a healthy 2x1 sweep as --baseline")
    show = sub.add_parser("table")
    show.add_argument("file")
    args = parser.parse_args(argv)
    if args.cmd == "table":
        print(table(args.file))
        return 0
    for slow in args.slow.split(","):
        with tempfile.TemporaryDirectory(prefix="hb_slow_") as work:
            for row in one(args.hosts, slow, args.rate, args.baseline, Path(work)):
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
