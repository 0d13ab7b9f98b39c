"""``envmatrix configs``: the bundled configs a pip user can name with ``conf=NAME``."""

from __future__ import annotations

import argparse
import json

from envmatrix.cli.common import add_command


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "configs", "list the bundled configs (conf=NAME) with their description and path",
                    "List the configs shipped with envmatrix; any of them can be named as conf=NAME from any "
                    "directory, copied as a starting point, or listed in a user config's defaults list.")
    p.add_argument("--json", action="store_true", help="one JSON list of {name, description, path}")
    p.set_defaults(func=cmd_configs)


def cmd_configs(args: argparse.Namespace) -> int:
    from envmatrix.app.configs import bundled_configs

    rows = bundled_configs()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        print(f"{r['name']:<{width}}  {r['description']}")
    print(f"\n{len(rows)} configs in {rows[0]['path'].rsplit('/', 1)[0]}; use one as conf=NAME, or copy it and pass conf=PATH")
    return 0
