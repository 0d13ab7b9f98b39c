"""``envmatrix cluster up N|down|list``: emulated hosts on this machine for multi-host grids without a cluster."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from envmatrix.cli.common import add_command, request_from
from envmatrix.errors import EXIT_FAILURES, EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "cluster", "emulated hosts on this machine (network namespaces on a bridge) for multi-host grids",
        "Build N emulated hosts, each a network namespace with its own address, /etc/hosts and "
        "hostname on a private bridge, reached by mpirun through a small agent script, so NxP grids (and the "
        "network: axis) run on one machine. Needs root. The cluster stays until 'cluster down'.",
        "examples:\n  envmatrix cluster up 4\n  envmatrix cluster up 16 --name c16 --slots 2\n"
        "  envmatrix cluster list\n  envmatrix cluster down --name c16\n  envmatrix cluster down --all",
    )
    actions = p.add_subparsers(dest="cluster_action", metavar="ACTION")
    actions.required = True
    up = actions.add_parser("up", help="build N emulated hosts; prints the hosts, a hostfile and the config lines")
    up.add_argument("hosts", type=int, metavar="N", help="number of hosts (1..200)")
    up.add_argument("--name", help="the cluster's name (default c<tag>)")
    up.add_argument("--slots", type=int, default=1, help="slots per host in the printed hostfile (default 1)")
    up.set_defaults(func=cmd_up)
    down = actions.add_parser("down", help="remove a cluster (its namespaces, links, files, processes)")
    which = down.add_mutually_exclusive_group()
    which.add_argument("--name", help="the cluster to remove (needed when there are several)")
    which.add_argument("--all", action="store_true", dest="everything", help="remove every cluster")
    down.set_defaults(func=cmd_down)
    listing = actions.add_parser("list", help="the clusters that exist, with their hosts")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    listing.set_defaults(func=cmd_list)


def cmd_up(args: argparse.Namespace) -> int:
    from envmatrix.app.cluster import ClusterUpRequest, up

    view = up(request_from(ClusterUpRequest, args))
    print(f"cluster {view.name}: {len(view.hosts)} hosts on bridge {view.bridge}")
    for host in view.hosts:
        print(f"  {host}  {view.addresses[host]}  namespace {view.namespaces[host]}  link {view.links[host]}")
    print(f"hostfile: {view.hostfile}")
    print(f"mpirun --hostfile {view.hostfile} --mca plm rsh --mca plm_rsh_agent {view.agent} ...")
    print("config lines:")
    for line in view.conf_snippet.splitlines():
        print(f"  {line}")
    print(f"remove it with: envmatrix cluster down --name {view.name}")
    return EXIT_OK


def cmd_down(args: argparse.Namespace) -> int:
    from envmatrix.app.cluster import ClusterDownRequest, down

    removed = down(request_from(ClusterDownRequest, args))
    if not removed:
        print("no clusters to remove")
    failed = False
    for name, left in removed:
        if left:
            failed = True
            print(f"cluster {name}: removed, but left behind: {', '.join(left)}")
        else:
            print(f"cluster {name}: removed")
    return EXIT_FAILURES if failed else EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    from envmatrix.app.cluster import listing

    views = listing()
    if args.json:
        print(json.dumps([asdict(v) for v in views], indent=1))
        return EXIT_OK
    if not views:
        print("no clusters (envmatrix cluster up N makes one)")
    for v in views:
        kind = "persistent" if v.persistent else ("owned by a running process" if v.owner_alive else "owner dead")
        print(f"{v.name}: {len(v.hosts)} hosts ({', '.join(v.hosts[:4])}{' ...' if len(v.hosts) > 4 else ''}), "
              f"{kind}; hostfile {v.hostfile}; agent {v.agent}")
    return EXIT_OK
