"""A command's resolved input: the config of its Hydra overrides, this host's GPUs, the caller's safety pins and
the variable catalog, each read once and handed to the command's lifecycle."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Optional, Sequence

from envmatrix.config.resolve import SweepInput
from envmatrix.errors import ConfigError, did_you_mean


class Prepared(NamedTuple):
    inp: SweepInput
    gpus: list
    pins: dict
    catalog: Any


def search_overrides(overrides: Sequence[str]) -> list[str]:
    """``search.x=v`` -> ``++search.x=v``: keys under the free-form ``search:`` mapping may be new."""
    return [f"++{o}" if o.startswith("search.") else o for o in overrides]


def prepare(overrides: Sequence[str], allow_unknown: bool = False, baseline_run: Optional[str] = None,
            tolerance: Optional[str] = None, *, search: bool = False, dry_run: bool = False,
            setups_optional: bool = False) -> Prepared:
    """The resolved input of ``overrides``; with ``baseline_run`` (a ``--baseline RUN_DIR`` of a command that
    judges slow) its floors join the expectations. ``search``: new ``search.*`` keys are allowed and a config
    without setups gets the empty one (a search samples its setups); ``setups_optional`` only the latter (bench
    measures the inherited env unless --setup names one)."""
    from envmatrix.catalog import load_catalog
    from envmatrix.config import compose_config
    from envmatrix.config.compose import overrides_blamed
    from envmatrix.config.resolve import resolve
    from envmatrix.env.merge import caller_pins
    from envmatrix.execution.hostinfo import gpu_inventory

    gpus = gpu_inventory()
    pins = caller_pins()
    cfg, conf_file = compose_config(search_overrides(overrides) if search else list(overrides))
    if search or setups_optional:
        from omegaconf import OmegaConf

        data = OmegaConf.to_container(cfg, resolve=True)
        if not data.get("setups") and not data.get("strategies"):
            data["setups"] = {"default": {}}  # search and bench need no setups; resolve() wants one
        cfg = OmegaConf.create(data)
    catalog = load_catalog()
    with overrides_blamed(conf_file, overrides):
        inp = resolve(cfg, conf_file, len(gpus), pins, allow_unknown=allow_unknown, catalog=catalog, dry_run=dry_run)
    if baseline_run is not None and not baseline_run.strip():
        raise ConfigError(f"--baseline {baseline_run!r}: empty; allowed: a recorded run directory, or leave --baseline out")
    if tolerance is not None and not baseline_run:
        raise ConfigError(f"--tolerance {tolerance}: only with --baseline RUN_DIR; allowed: --baseline RUN_DIR --tolerance 10%")
    if baseline_run:
        from envmatrix.app.report import load_baseline

        floors = load_baseline(baseline_run, "10%" if tolerance is None else tolerance)
        inp = dataclasses.replace(inp, expectations=inp.expectations + floors)
    return Prepared(inp, gpus, pins, catalog)


def allows_ignored(inp: SweepInput, flag: bool) -> bool:
    """The one rule for variables the backend never reads: varying only those is refused (exit 2) unless
    --allow-ignored-vars or the config's ``allow_ignored_vars: true``; how the backend was chosen does not matter."""
    return flag or bool(inp.config.get("allow_ignored_vars"))


def check_probe_runs(probe_spec: Any, launcher: Any) -> None:
    """ConfigError when the launcher's program is not here, or no rank of ``probe_spec`` could run here (a probe
    binary not on PATH, the mpi probe without mpi4py): found once, before anything launches or is written, instead of
    once per run. Ranks on other hosts (launcher.node_hosts) have their own PATH and modules: not checked."""
    import os
    import sys

    from envmatrix.probes import get_probe

    reason = launcher.missing_here()  # the launcher itself starts here, whatever hosts its ranks run on
    if reason:
        raise ConfigError(reason)
    if launcher.node_hosts(os.environ):
        return
    reason = get_probe(probe_spec.name).missing_here(probe_spec, sys.executable)
    if reason:
        raise ConfigError(reason)


def named_setup(inp: SweepInput, name: str, flag: str = "--setup", what: str = "not in") -> Any:
    """The setup of the config called ``name``; ConfigError naming the flag and the setups there are."""
    named = {s.name: s for s in inp.setups}
    if name not in named:
        raise ConfigError(f"{flag} {name!r}: {what} {inp.conf_file.name}{did_you_mean(name, named)}; allowed: {', '.join(named)}")
    return named[name]

