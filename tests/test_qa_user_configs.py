"""Every bundled config, as a new user meets it: `envmatrix configs` says what each is in a whole sentence, each
one dry-runs here (a GPU-less host: NCCL configs planned for mpirun hosts, as on a login node), and none varies
a safety pin."""

from __future__ import annotations

import pytest
import yaml

from envmatrix.app.configs import bundled_configs
from envmatrix.cli import main
from envmatrix.env.merge import SAFETY_PINS

CONFIGS = bundled_configs()


def test_configs_lists_every_bundled_config():
    assert len(CONFIGS) >= 10


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c["name"])
def test_each_description_is_a_whole_sentence(config):
    text = config["description"]
    assert text.endswith("."), f"envmatrix configs: {config['name']}: {text!r} is cut off (give it a description: key)"


def dry_run_argv(config: dict[str, str]) -> list[str]:
    data = yaml.safe_load(open(config["path"], encoding="utf-8"))
    command = "search" if "search" in data and not data.get("setups") and not data.get("strategies") else "sweep"
    argv = [command, f"conf={config['name']}", "--dry-run"]
    if data.get("backend") == "nccl":
        argv += ["launcher=mpirun", "hosts=[node01,node02,node03,node04]"]
    return argv


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c["name"])
def test_each_bundled_config_dry_runs_here(config, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = dry_run_argv(config)
    assert main(argv) == 0, f"envmatrix {' '.join(argv)}: {capsys.readouterr().err}"
    assert not list(tmp_path.iterdir()), "a dry run wrote into the cwd"


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c["name"])
def test_no_bundled_config_varies_a_safety_pin(config):
    data = yaml.safe_load(open(config["path"], encoding="utf-8"))
    varied = set((data.get("search") or {}).get("space") or {})
    for setup in (data.get("setups") or {}).values():
        varied |= set(setup or {})
    for strategy in data.get("strategies") or []:
        varied |= set(strategy.get("vars") or {})
    assert not varied & set(SAFETY_PINS), f"{config['name']} varies {sorted(varied & set(SAFETY_PINS))}"
