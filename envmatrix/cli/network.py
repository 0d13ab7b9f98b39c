"""``envmatrix network show|reset``: what envmatrix's network conditions installed, and removing it by hand."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from envmatrix.cli.common import add_command, request_from
from envmatrix.errors import EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "network", "show or remove the qdiscs envmatrix's network conditions installed",
        "Network conditions (the network: axis) are installed as qdiscs for the length of a run and "
        "removed at its end, on Ctrl-C, and by the next command after a kill -9. 'show' lists what is installed "
        "now and what the kernel can do; 'reset' removes what killed runs left (--force: live runs' too) and "
        "lists what it removed (--unrecorded: also envmatrix handles no record accounts for).",
        "examples:\n  envmatrix network show\n  envmatrix network reset\n  envmatrix network reset --force --unrecorded",
    )
    actions = p.add_subparsers(dest="network_action", metavar="ACTION")
    actions.required = True
    show = actions.add_parser("show", help="the links envmatrix shapes now, their qdiscs, and the kernel's support")
    show.add_argument("--json", action="store_true", help="print it as JSON")
    show.set_defaults(func=cmd_show)
    reset = actions.add_parser("reset", help="remove what killed runs left installed, listing each item")
    reset.add_argument("--force", action="store_true", help="also remove what live runs installed")
    reset.add_argument("--unrecorded", action="store_true", help="also remove envmatrix's qdiscs and ifbs that no "
                       "state file accounts for, in every namespace (e.g. after /run was cleared)")
    reset.set_defaults(func=cmd_reset)


def cmd_reset(args: argparse.Namespace) -> int:
    from envmatrix.app.network import NetworkResetRequest, reset

    outcome = reset(request_from(NetworkResetRequest, args))
    for item in outcome.removed:
        print(f"removed {item}")
    for link in outcome.kept_live:
        print(f"kept {link}: a live run shapes it (--force removes it)")
    if not outcome.removed:
        print("nothing to remove")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from envmatrix.app.network import show

    view = show()
    if args.json:
        print(json.dumps(asdict(view), indent=1))
        return EXIT_OK
    works = [k for k, v in view.kernel.items() if v is None]
    missing = [f"{k} ({v})" for k, v in view.kernel.items() if v is not None]
    print(f"kernel: works: {', '.join(works) or 'none'}; missing: {', '.join(missing) or 'none'}")
    if not view.links and not view.unrecorded:
        print("no network conditions installed")
    for item in view.links:
        owner = f"pid {item.owner_pid}, {'running' if item.owner_alive else 'dead: the next command removes it'}"
        print(f"{item.link}: {item.condition} ({owner})")
        for line in item.tree.splitlines():
            print(f"  {line}")
    for item in view.unrecorded:
        print(f"unrecorded: {item} (envmatrix network reset --unrecorded removes it)")
    return EXIT_OK
