"""``envmatrix configs``: the bundled configs a pip user can name with ``conf=NAME``."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "configs",
        help="list the bundled configs (conf=NAME) with their description and path",
        description="List the configs shipped with envmatrix; any of them can be named as conf=NAME from any "
        "directory, copied as a starting point, or listed in a user config's defaults list.",
    )
    p.add_argument("--json", action="store_true", help="one JSON list of {name, description, path}")
    p.set_defaults(func=cmd_configs)


def bundled_configs() -> list[dict[str, str]]:
    from envmatrix.config.compose import CONF_DIR, available_confs, read_yaml_mapping

    rows = []
    for name in available_confs():
        path = CONF_DIR / f"{name}.yaml"
        description = str(read_yaml_mapping(path).get("description") or _first_comment(path)).strip()
        rows.append({"name": name, "description": description, "path": str(path)})
    return rows


def _first_comment(path) -> str:
    """Configs without a description key usually say what they are in their first comment line."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("# ")
    return ""


def cmd_configs(args: argparse.Namespace) -> int:
    rows = bundled_configs()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        print(f"{r['name']:<{width}}  {r['description']}")
    print(f"\n{len(rows)} configs in {rows[0]['path'].rsplit('/', 1)[0]}; use one as conf=NAME, or copy it and pass conf=PATH")
    return 0
