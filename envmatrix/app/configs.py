"""``envmatrix configs``: the bundled configs a pip user can name with ``conf=NAME``."""

from __future__ import annotations

from pathlib import Path


def bundled_configs() -> list[dict[str, str]]:
    """{name, description, path} of every bundled config, in name order."""
    from envmatrix.config.compose import CONF_DIR, available_confs, read_yaml_mapping

    rows = []
    for name in available_confs():
        path = CONF_DIR / f"{name}.yaml"
        description = str(read_yaml_mapping(path).get("description") or first_comment(path)).strip()
        rows.append({"name": name, "description": description, "path": str(path)})
    return rows


def first_comment(path: Path) -> str:
    """Configs without a description key usually say what they are in their first comment line."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("# ")
    return ""
