"""``envmatrix bisect``: from a failing env to every culprit, then a repair."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

from envmatrix.cli.common import add_command, add_emulate_hosts_flag, make_console, print_outputs, request_from

EXAMPLES = """Every failure signature (outcome + root-cause line) gets its own culprit search; an init failure masks later
ones, so once a signature's culprits are proven the env without them is probed and bisected again until it passes.
bisect exits 1 when culprits were found, 0 when nothing fails (nothing to bisect), 3 when inconclusive (probe cap
reached, culprits unproven, no passing repaired env, an env failing only some of its --repeats runs), 2 on bad
input.
With --versions: 1 when a first bad version is named, 0 when the last version is good, 3 when skipped versions
leave several candidates or an end cannot be used (versions[0] bad or skipped, last version skipped).

examples:
  envmatrix bisect conf=aws_ofi --failing 2x2                  # failing setups of the last sweep on 2x2
  envmatrix bisect conf=aws_ofi --failing 2x2 --setup 0 --baseline 3
  envmatrix bisect --grid 2x2 --env-file seed003_env0.sh       # KEY=VALUE / export lines as pasted
  envmatrix bisect --grid 1x2 --env-file env.sh --probe-cmd 'my_check --fast' --repeats 3
  envmatrix bisect --grid 2x2 --versions /opt/nccl/2.27/lib /opt/nccl/2.28/lib /opt/nccl/2.29/lib
  envmatrix bisect --hosts hosts.txt conf=aws_ofi launcher=mpirun --grid 1x8   # which hosts / host pairs fail
  envmatrix bisect --hosts slurm launcher=srun                                 # the nodes of this allocation
  envmatrix bisect --hosts hosts.txt conf=aws_ofi --baseline reports/runs/good --tolerance 10%   # slow against a run

With --hosts: all hosts in disjoint pairs at once, each host of a failing pair with a known-good one, then the
culprits alone beside the rest together (a bad link: halves of the failing set at once); prints each host ok / failing / slow with its evidence runs, an `exclude:` line (a Slurm --exclude
string) and a hostfile without them. With probe.bench the first rounds are pair rounds: a pair is slow below a quarter of
the other pairs of its round, a host slow when all its pairs are (printed with how sure); other groups are slow below the config's
expect: floors or, with --baseline RUN_DIR, the busbw of that recorded run less --tolerance (default 10%) for the same
setup, grid and backend (a baseline without 2xP pair figures cannot judge: exit 3). Exit 1 when culprit hosts or
links are found, 0 none, 3 inconclusive.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    # `duplicates` pairs this call with sweep's: alike in shape only, each passes its own texts to the one helper.
    p = add_command(sub, "bisect", "find every culprit atom of a failing env (and repair it), or the first bad NCCL/plugin version",
                    "Bisect a failing environment to its minimal failing atom sets with few probes; each answer is "
                    "proven by probes. Each variable assignment and each path entry is one atom.", EXAMPLES,
                    overrides="Hydra overrides choosing the config (conf=..., backend=..., probe.timeout_s=...)",
                    out="run directory / store (default: reports/runs/<name>)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--failing", metavar="GRID", help="bisect the setups that failed on GRID in the last sweep of the store")
    src.add_argument("--env-file", metavar="FILE", help="KEY=VALUE lines (export prefixes, quotes, comments, $VAR) to bisect; needs --grid")
    src.add_argument("--versions", nargs="+", metavar="PATH", help="ordered NCCL library / plugin paths (first good ... last bad)")
    src.add_argument("--versions-file", metavar="FILE", help="the same, one path per line")
    src.add_argument("--hosts", metavar="FILE", help="find the bad hosts and host pairs among these: one host a line (HOST, HOST N, HOST:N, "
                     "an MPI hostfile's HOST slots=N), or 'slurm' for the nodes of SLURM_JOB_NODELIST; --grid 1xP sets ranks per host")
    p.add_argument("--grid", help="NxP for --env-file / --versions (default: the config's first grid)")
    p.add_argument("--setup", help="with --failing: only this setup")
    p.add_argument("--baseline", metavar="SETUP|RUN_DIR", help="env bisect: a passing SETUP of the config to bisect against "
                   "(default: empty env); with --hosts: a recorded RUN_DIR whose busbw points less --tolerance are floors, "
                   "below them a host group is slow (as sweep/bench --baseline)")
    p.add_argument("--tolerance", metavar="PCT", help="with --hosts --baseline RUN_DIR: allowed drop, e.g. 10%% (default), 2.5 or 0.05")
    p.add_argument("--version-mode", choices=("auto", "preload", "library_path"), help="with --versions: how the paths are applied (default auto)")
    p.add_argument("--probe-cmd", metavar="CMD", help="command each rank runs instead of the built-in probe (exit 0 pass, 125 unresolved, else fail)")
    p.add_argument("--repeats", type=int, default=1, help="settle each probe by majority of up to 2K-1 runs (flaky probes)")
    p.add_argument("--max-probes", type=int, metavar="N", help="cap on probes of the search and peeling (default: max(24, 4*ceil(log2(1+n+n(n-1)/2))) "
                   "for n atoms, 4x the bits naming up to two culprit atoms; times 4K with --repeats K); at the cap the report lists what is proven and the "
                   "atoms still suspect, exit 3. Repair probes come after the cap (--no-repair skips them)")
    p.add_argument("--json", metavar="PATH", help="write culprit sets, probes launched and the trail as JSON")
    p.add_argument("--junit", metavar="PATH", help="also write JUnit XML: one testcase per probed (setup, grid), the root-cause line as message")
    p.add_argument("--no-repair", action="store_true", help="skip trying other values of each culprit")
    p.add_argument("--allow-ignored-vars", action="store_true",
                   help="bisect even when the backend reads none of the variables (e.g. to check env delivery)")
    p.add_argument("--rerun", action="store_true", help="probe again even when the store has the same env")
    add_emulate_hosts_flag(p)
    p.set_defaults(func=cmd_bisect)


def cmd_bisect(args: argparse.Namespace) -> int:
    from envmatrix.app.bisect import BisectRequest, EnvBisectResult, bisect
    from envmatrix.app.bisect_versions import VersionBisectResult

    console = make_console()
    if args.versions:
        # --versions takes every word after it: the overrides among them (conf=x, backend=gloo) are overrides,
        # as anywhere else on the line
        args.overrides = [*args.overrides, *(w for w in args.versions if is_override(w))]
        args.versions = [w for w in args.versions if not is_override(w)]
    done = bisect(request_from(BisectRequest, args), events(console))
    if isinstance(done, EnvBisectResult):
        if done.note:
            console.print(done.note, markup=False, soft_wrap=True)
        if done.outputs is not None:
            print_outputs(console, done.outputs)
    elif isinstance(done, VersionBisectResult):
        console.print(done.verdict.message, markup=False)
        print_outputs(console, done.outputs)
    else:
        print_hosts(console, done)
    return done.exit_code


def is_override(word: str) -> bool:
    """``key=value`` with a config key (conf=x, probe.timeout_s=5, +search.x=1), not a path that holds '='."""
    return re.match(r"[+~]{0,2}[A-Za-z_][A-Za-z0-9_.]*=", word) is not None and not os.path.exists(word)


def events(console: Any) -> Any:
    from envmatrix.app.bisect import BisectEvents
    from envmatrix.reporting.console import probe_line

    def probe(target: str, label: str, result: Any, launched: bool) -> None:
        console.print(probe_line(target, label, result, launched=launched), markup=False)

    def report(markdown: str, path: str) -> None:
        from rich.markdown import Markdown

        console.print(Markdown(markdown))
        console.print(f"report: {path}")

    def version(grid: str, version: str, result: Any) -> None:
        console.print(f"[versions {grid}] {version}: {'pass' if result.passed else result.outcome}", markup=False)

    def host_round(evidence: Any, result: Any) -> None:
        cause = (result.root_cause or {}).get("line") or ""
        figure = f" {evidence.figure:.3g} GB/s" if evidence.figure is not None else ""  # pairs: judged after the round
        console.print(f"round {evidence.round}: {','.join(evidence.hosts)}: {evidence.verdict}{figure}"
                      + (f" ({result.outcome}: {cause})" if evidence.verdict != "ok" else ""), markup=False, soft_wrap=True)

    return BisectEvents(warn=lambda line: print(f"envmatrix: {line}", file=sys.stderr), probe=probe, report=report, version=version,
                        host_round=host_round)


def print_hosts(console: Any, done: Any) -> None:
    result = done.result
    for name in done.hosts:
        verdict = result.verdicts[name]
        evidence = ", ".join(e.run for e in verdict.evidence if e.verdict != "ok")[:300]
        console.print(f"{name}: {verdict.status}" + (f" ({verdict.why}; evidence: {evidence})" if verdict.status != "ok" else ""),
                      markup=False, soft_wrap=True)
    console.print(f"{result.rounds} rounds, {result.runs} runs" + (f"; {result.note}" if result.note else ""), markup=False)
    console.print(result.exclude_line, markup=False, soft_wrap=True)
    console.print(f"hostfile without them: {done.hostfile}\nreport: {done.report}", markup=False, soft_wrap=True)
