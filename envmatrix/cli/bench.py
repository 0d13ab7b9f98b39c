"""``envmatrix bench``: nccl-tests-like busbw for one setup on one grid, printed like nccl-tests."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from envmatrix.bench.sizes import DTYPE_BYTES
from envmatrix.bench.timing import TIMINGS
from envmatrix.cli.common import (LineProgress, add_command, add_emulate_hosts_flag, add_network_flag, add_threshold_flags,
                                  make_console, print_outputs, print_shaping_missed, request_from)
from envmatrix.errors import ConfigError

BENCH_ONLY_FLAGS = ("-b/--min-bytes", "-e/--max-bytes", "-f/--factor", "-i/--step-bytes", "--timing")
PAIR_FLAGS = ("--gpu-pairs", "--pair-size", "--latency-size", "--iperf-seconds", "--pair-tolerance")

EXAMPLES = """examples:
  envmatrix bench --grid 1x4 -b 64M -e 1G -f 4 -c allreduce,allgather,alltoall
  envmatrix bench conf=aws_ofi --setup 2 --grid 2x2
  envmatrix bench --env NCCL_ALGO=Ring --env NCCL_PROTO=Simple
  envmatrix bench --pairs gpus --setup baseline,no_p2p     # every GPU pair, P2P on and off, and their ratio
  envmatrix bench conf=my_hosts.yaml --pairs hosts         # host pairs in rounds: RTT, time, GB/s, iperf3; slow host
  envmatrix bench --grid 2x8 --peers rail,cross -b 8K -e 4M   # seed 002: rail-aligned vs cross-rail all-to-all
  envmatrix bench conf=cluster.yaml --grid 2x1 -c p2p -b 64M -e 128M --backends gloo,nccl \\
      --network default --network b1:rate=1gbit               # seed 000's table (docs/network.md)"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "bench", "nccl-tests-like busbw for one setup on one grid",
                    "Time value-checked collectives over a size sweep for one env on one grid, like nccl-tests; "
                    "busbw uses nccl-tests' per-collective factors. Results go to the store; tables to screen and Markdown.",
                    EXAMPLES,
                    overrides="Hydra overrides choosing the config (conf=..., backend=...)",
                    out="run directory (default: reports/runs/bench)")
    p.add_argument("--grid", help="NxP (default: the config's first grid)")
    p.add_argument("--setup", help="a setup of the config (default: the inherited env only)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra variable on top of the setup (repeatable)")
    # absent unless given (the request's default applies): --pairs and --peers say a given -c, not ignore it; the
    # size and timing flags likewise (a pair test has its own sizes, --pair-size and --latency-size, and timing)
    p.add_argument("-c", "--collectives", default=argparse.SUPPRESS, help="comma list (allreduce, allgather, reduce_scatter, alltoall, broadcast, reduce, sendrecv, p2p, ps_central, ps_sharded; default allreduce,allgather,alltoall)")
    p.add_argument("-b", "--min-bytes", default=argparse.SUPPRESS, help="smallest size (default 8)")
    p.add_argument("-e", "--max-bytes", default=argparse.SUPPRESS, help="largest size (default 1G on GPUs, 1M on CPU)")
    p.add_argument("-f", "--factor", default=argparse.SUPPRESS, help="size multiplication factor (default 2; not with -i)")
    p.add_argument("-i", "--step-bytes", default=argparse.SUPPRESS, help="additive size step instead of a factor")
    # these too: unless given, the config's probe.bench keys apply (docs/bench.md)
    p.add_argument("-n", "--iters", type=int, default=argparse.SUPPRESS, help="timed iterations per size (default 20)")
    p.add_argument("-w", "--warmup", type=int, default=argparse.SUPPRESS, help="warmup iterations per size, all sizes (doubling from -b to -e) before the first timed one, as nccl-tests (default 5)")
    p.add_argument("-d", "--dtype", default=argparse.SUPPRESS, help=f"element type: {', '.join(DTYPE_BYTES)} (default float32)")
    p.add_argument("--no-check", action="store_true", default=argparse.SUPPRESS,
                   help="skip the #wrong check (nccl-tests -c 0)")
    p.add_argument("--timing", choices=tuple(TIMINGS), default=argparse.SUPPRESS,
                   help="; ".join(f"{k}: {v}" for k, v in TIMINGS.items()))
    p.add_argument("--timeout", type=float, default=argparse.SUPPRESS,
                   help="probe timeout in seconds (default: the config's probe.timeout_s where it sets one, else 600)")
    p.add_argument("--backends", metavar="LIST", help="e.g. gloo,nccl: the same bench on each backend, side by side (seed 000)")
    p.add_argument("--rerun", action="store_true", help="measure again even if the store has this exact run")
    add_network_flag(p)
    add_emulate_hosts_flag(p)
    add_threshold_flags(p)
    who = p.add_argument_group("who talks to whom (docs/pairs.md)")
    who.add_argument("--pairs", choices=("gpus", "hosts"), help="gpus: every GPU pair of this host (one per setup of "
                     "a comma --setup list, and their ratio); hosts: one rank per host, pairs in rounds")
    who.add_argument("--gpu-pairs", metavar="LIST", default=argparse.SUPPRESS, help="with --pairs gpus: only these pairs, e.g. 0-3,1-7")
    who.add_argument("--pair-size", metavar="SIZE", default=argparse.SUPPRESS, help="bandwidth size (default 256M for gpus, 64M for hosts)")
    who.add_argument("--latency-size", metavar="SIZE", default=argparse.SUPPRESS, help="latency size (default 8)")
    who.add_argument("--iperf-seconds", type=int, default=argparse.SUPPRESS, help="with --pairs hosts: iperf3 -t (default 10)")
    who.add_argument("--pair-tolerance", type=float, default=argparse.SUPPRESS, metavar="FRACTION",
                     help="a pair this far below its round's (hosts) or link class's (gpus) median is slow (default 0.25)")
    who.add_argument("--peers", metavar="LIST", help="all-to-all over peer groups instead of -c: all, rail (same local "
                     "rank on other nodes), cross (any rank on other nodes); same bytes and messages per rank")
    who.add_argument("--inflight", type=int, metavar="N", help="with --peers: messages in flight per rank (default: all)")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    from envmatrix.app.bench import BenchRequest, backends_table, bench

    console = make_console()
    if args.pairs:
        # bench's own flags a pairs run does not take: said, not ignored (--network would read as shaped pairs)
        for flag, value in (("--network", args.network), ("--peers", args.peers), ("--inflight", args.inflight),
                            ("--backends", args.backends), ("--baseline", args.baseline),
                            ("-c/--collectives", getattr(args, "collectives", None)),
                            *((f, vars(args).get(f.split("--")[-1].replace("-", "_"))) for f in BENCH_ONLY_FLAGS),
                            ("--no-check", vars(args).get("no_check"))):
            if value is not None and value is not False and value != []:  # --inflight 0 is given too
                raise ConfigError(f"{flag}: not with --pairs {args.pairs} (it measures its own pairs, unshaped, on "
                                  f"the config's backend); allowed: drop {flag}, or bench without --pairs")
        if args.pairs == "gpus" and "iperf_seconds" in vars(args):
            raise ConfigError(f"--iperf-seconds {args.iperf_seconds}: only with --pairs hosts (GPU pairs run no iperf3); "
                              "allowed: drop --iperf-seconds, or --pairs hosts")
        return cmd_pairs(args, console)
    # the pair flags are absent unless given (their defaults are the pairs request's): said, not ignored
    given = [flag for flag in PAIR_FLAGS if flag.lstrip("-").replace("-", "_") in vars(args)]
    if given:
        raise ConfigError(f"{given[0]} {getattr(args, given[0].lstrip('-').replace('-', '_'))}: only with --pairs; "
                          f"allowed: --pairs gpus|hosts {given[0]} ..., or drop {given[0]}")
    if args.peers and "collectives" in vars(args):  # the peer all-to-all rows are the bench's collectives
        raise ConfigError(f"-c/--collectives {args.collectives}: not with --peers {args.peers} (its all-to-all rows "
                          "replace -c); allowed: one of them")
    done = bench(request_from(BenchRequest, args), LineProgress(console, "bench"), on_run=lambda run: print_bench(console, run),
                 warn=lambda line: print(f"envmatrix: {line}", file=sys.stderr))
    if done.backends_report:
        console.print(right_aligned_table("backends side by side", *backends_table([r.result for r in done.runs])))
        console.print(f"report: {done.backends_report}")
    if done.conditions_report:
        with open(done.conditions_report) as fh:
            console.print(fh.read(), markup=False, soft_wrap=True)
        console.print(f"report: {done.conditions_report} (and conditions.csv)", markup=False)
    print_shaping_missed(console, done.shaping_missed)
    print_outputs(console, done.outputs)
    return done.exit_code


def right_aligned_table(title: str, header: Any, rows: Any) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for col in header:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def print_bench(console: Any, run: Any) -> None:
    from rich.text import Text

    from envmatrix.reporting.bench_tables import (NCCL_TESTS_COLUMNS, busbw_by_size, collective_title, nccl_tests_rows,
                                                  shared_gpu_note, timing_label)

    result = run.result
    if result.network:  # --network prints one run's tables after another's: say whose figures these are
        console.print(f"network {result.condition_name} ({result.condition_value})", markup=False)
    for collective in dict.fromkeys(m["collective"] for m in result.metrics):
        console.print(right_aligned_table(collective_title(result.metrics, collective), NCCL_TESTS_COLUMNS, nccl_tests_rows(result.metrics, collective)))
    if result.metrics:
        console.print(right_aligned_table(f"busbw (GB/s) vs size ({timing_label(result.metrics)})", *busbw_by_size(result.metrics)))
        note = shared_gpu_note([result])
        if note:  # ranks shared a GPU as emulated hosts: the tables stand, their meaning does not
            console.print(Text(f"{note}: pass/fail and transport hold, these figures do not", style="bold yellow"))
    if result.thresholds:
        from envmatrix.reporting.bench_tables import threshold_rows

        console.print(right_aligned_table("expectations (measured / expected)", *threshold_rows(result.thresholds)))
    if any(m.get("peer_group") for m in result.metrics):
        from envmatrix.reporting.pairs_tables import peer_lists, peers_table

        console.print(right_aligned_table("peer groups: all-to-all GB/s per rank", *peers_table(result.metrics)))
        for line in peer_lists(result.metrics):
            console.print(line, markup=False, soft_wrap=True)
    if not result.passed:
        console.print(Text(f"{result.outcome}: {result.root_cause.get('line')}", style="bold red"))
    console.print(f"report: {run.report}")


def cmd_pairs(args: argparse.Namespace, console: Any) -> int:
    from envmatrix.app.pairs import DEFAULT_TOLERANCE, PairsRequest, pairs

    setups = tuple(s.strip() for s in (args.setup or "").split(",") if s.strip())
    if args.setup is not None and not setups:  # an unset shell variable is not the flag left out
        raise ConfigError(f"--setup {args.setup!r}: names no setup; allowed: setups of the config, comma-separated, "
                          "or leave --setup out (the inherited env)")
    tolerance = vars(args).get("pair_tolerance", DEFAULT_TOLERANCE)  # bench's --tolerance is --baseline's
    done = pairs(request_from(PairsRequest, args, kind=args.pairs, setups=setups, tolerance=tolerance),
                 LineProgress(console, "bench"))
    console.print(done.markdown, markup=False, soft_wrap=True)
    for result in done.results:
        if not result.passed:
            console.print(f"{result.outcome}: {result.root_cause.get('line')}", markup=False, style="bold red")
    console.print(f"report: {done.report}", markup=False)
    print_outputs(console, done.outputs)
    return done.exit_code
