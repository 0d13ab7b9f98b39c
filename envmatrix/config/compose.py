"""Compose a config with Hydra's compose API.

``conf=NAME`` picks conf/NAME(.yaml) or any file path; its content is stored in
Hydra's ConfigStore as the ``conf/selected`` option, so built-in defaults,
the user's file and the command-line overrides compose in that order, and the
typed schema rejects values such as ``max_local_ranks=abc``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import yaml

from envmatrix.errors import ConfigError, did_you_mean

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = REPO_ROOT / "conf"
DEFAULT_CONF = "default"


def available_confs() -> list[str]:
    return sorted(p.stem for p in CONF_DIR.glob("*.yaml") if p.stem != "config")


def resolve_conf_file(value: str | None) -> Path:
    value = value or DEFAULT_CONF
    candidates = [Path(value).expanduser()]
    if not Path(value).is_absolute():
        candidates += [CONF_DIR / value, CONF_DIR / f"{value}.yaml"]
    for path in candidates:
        if path.is_file():
            return path.resolve()
    stem = Path(value).stem
    raise ConfigError(
        f"conf={value}: no such config file{did_you_mean(stem, available_confs())}; "
        f"allowed: a file path or one of {', '.join(available_confs())} (in {CONF_DIR})"
    )


def load_yaml_mapping(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: malformed YAML ({problem}); fix the syntax at that line") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level is a {type(data).__name__}; allowed: a mapping of config keys")
    if "defaults" in data:
        data = {k: v for k, v in data.items() if k != "defaults"}
    return data


def split_conf_override(overrides: Sequence[str]) -> tuple[str | None, list[str]]:
    conf, rest = None, []
    for item in overrides:
        if item.startswith("conf="):
            conf = item.split("=", 1)[1]
        else:
            rest.append(item)
    return conf, rest


def register_probe_groups(store: Any) -> None:
    """One Hydra group option per registered probe, holding that probe's parameters and defaults."""
    from envmatrix.probes import get_probe, probe_names

    for name in probe_names():
        store.store(group="probe", name=name, node={"name": name, **get_probe(name).defaults})


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def compose_config(overrides: Sequence[str]) -> tuple[Any, Path]:
    """Return (DictConfig, the conf file used)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.config_store import ConfigStore
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from envmatrix.config.schema import SweepSchema

    conf_value, rest = split_conf_override(overrides)
    conf_file = resolve_conf_file(conf_value)
    content = load_yaml_mapping(conf_file)
    allowed = list(SweepSchema.__dataclass_fields__)
    for key in content:
        if key not in allowed:
            raise ConfigError(f"{conf_file}: unknown key {key!r}{did_you_mean(str(key), allowed)}; allowed: {', '.join(allowed)}")
    store = ConfigStore.instance()
    store.store(name="envmatrix_schema", node=SweepSchema)
    store.store(group="conf", name="selected", node=content, package="_global_")
    register_probe_groups(store)
    # The probe group must match the probe the file names, so its keys are the right ones.
    chosen = [o for o in rest if o.startswith("probe=")]
    named = (content.get("probe") or {}).get("name") if isinstance(content.get("probe"), dict) else None
    group = [] if chosen else [f"probe={named or 'builtin'}"]
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=["conf=selected", *group, *rest])
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        raise ConfigError(_explain(exc, conf_file, rest)) from None
    OmegaConf.set_readonly(cfg, True)
    return cfg, conf_file


def _explain(exc: BaseException, conf_file: Path, overrides: Sequence[str]) -> str:
    from envmatrix.config.schema import SweepSchema

    full = f"{exc}\n{exc.__cause__ or ''}"
    message = _one_line(exc)
    keys = list(SweepSchema.__dataclass_fields__)
    if "Ambiguous value" in message:
        bad = next((o for o in overrides if "," in o and "[" not in o), "")
        key = bad.split("=", 1)[0]
        return f"override {bad}: a comma list needs brackets here; write {key}=[{bad.split('=', 1)[-1]}]"
    if "Key '" in full and "not in" in full:
        key = full.split("Key '", 1)[1].split("'", 1)[0]
        return f"overrides: unknown key {key!r}{did_you_mean(key, keys)}; allowed: {', '.join(keys)}"
    for line in full.splitlines():
        if "could not be converted" in line or line.strip().startswith("Value '"):
            key = next((ln.split(":", 1)[1].strip() for ln in full.splitlines() if "full_key:" in ln), "?")
            return f"override {key}: {line.strip()}; give a value of that type"
    return f"{conf_file.name}: {message}"
