"""Resolve a composed config into a validated sweep input (no processes, no writes)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from envmatrix import values
from envmatrix.env.atoms import UNSET, Atom, Setup
from envmatrix.env.merge import MULTICAST_OFF, SAFETY_PINS
from envmatrix.errors import ConfigError, PlanError, did_you_mean
from envmatrix.paths import check_name
from envmatrix.planning.grid import Grid, auto_grids, check_fits, nodes_elsewhere, parse_grids
from envmatrix.planning.plan import ProbeSpec

BACKENDS = ("auto", "nccl", "gloo")


@dataclass(frozen=True)
class SweepInput:
    name: str
    conf_file: Path
    backend: str
    grids: tuple[Grid, ...]
    setups: tuple[Setup, ...]
    probe: ProbeSpec
    launcher: str
    seed: int
    config: dict[str, Any]
    launcher_opts: dict[str, Any] = dataclasses.field(default_factory=dict)
    hosts: tuple[str, ...] = ()
    hermetic: bool = False
    expectations: tuple[Any, ...] = ()  # bench.expect.Expectation: the expect: block, plus --baseline floors
    # the network: axis (config.network): each run once per condition; () = no axis (runs unshaped, keys as before)
    conditions: tuple[Any, ...] = ()
    network_options: Any = None  # config.network.NetworkOptions
    # the launcher resolve() configured (options, hosts, allocation): make_launcher reuses it, so a command builds one
    configured_launcher: Any = dataclasses.field(default=None, compare=False, repr=False)

    def probe_environment(self, environ: Mapping[str, str], host: dict[str, Any]) -> dict[str, str]:
        """The env every rank inherits; hermetic runs record what they neutralised in ``host``."""
        if not self.hermetic:
            return dict(environ)
        from envmatrix.catalog import load_catalog
        from envmatrix.env.hermetic import hermetic_environment

        env, facts = hermetic_environment(environ, host.get("nccl_conf_files") or [], load_catalog())
        host["hermetic"] = facts
        return env

    @property
    def launcher_key(self) -> str:
        """The launcher's identity in run keys: its name, plus a digest of its options and hosts."""
        key = self.launcher + ("+hermetic" if self.hermetic else "")
        if not self.launcher_opts and not self.hosts:
            return key
        canon = json.dumps({"opts": self.launcher_opts, "hosts": list(self.hosts)}, sort_keys=True)
        return f"{key}+{hashlib.sha256(canon.encode()).hexdigest()[:8]}"

    def make_launcher(self) -> Any:
        """The configured launcher, checked against this input's grids and backend (a Slurm/PBS allocation)."""
        if self.configured_launcher is None:
            from envmatrix.launchers import configure_launcher

            return configure_launcher(self.launcher, self.launcher_opts, self.hosts, self.grids, self.backend)
        self.configured_launcher.check_allocation(self.grids, self.backend, os.environ)
        return self.configured_launcher


def resolve_backend(value: str, gpus: int, nodes_are_other_hosts: bool = False) -> str:
    """``nodes_are_other_hosts``: no rank runs here, so GPUs missing here (a login node) say nothing."""
    if value not in BACKENDS:
        raise ConfigError(f"backend: {value!r} not allowed; allowed: {', '.join(BACKENDS)}")
    if value == "auto":
        return "nccl" if gpus > 0 else "gloo"
    if value == "nccl" and gpus == 0 and not nodes_are_other_hosts:
        raise ConfigError("backend: nccl needs GPUs but none are visible here; use backend=gloo (CPU) or run on a GPU host")
    return value


class CatalogValues:
    """Adapter giving strategies the catalog's value domains and pins."""

    def __init__(self, catalog: Any) -> None:
        self.catalog = catalog

    def values(self, var: str) -> list[str]:
        return self.catalog.values(var)

    def is_pinned(self, var: str) -> bool:
        spec = self.catalog.spec(var)
        return var in SAFETY_PINS or bool(spec is not None and spec.pinned)


def ranks_elsewhere(launcher: Any) -> bool:
    """Every node ``launcher`` starts is another host (this one, e.g. a login node, runs no rank)."""
    return nodes_elsewhere(launcher.node_hosts(os.environ), socket.gethostname())


def check_grids_fit(grids: Sequence[Grid], backend: str, gpus: int, max_cpu_ranks: int, launcher: Any) -> None:
    """planning.check_fits where ``launcher`` puts the ranks: this host, or one node per host given."""
    check_fits(grids, backend, gpus, max_cpu_ranks, launcher.node_hosts(os.environ), socket.gethostname(),
               emulate_hosts=launcher.emulates_hosts)


def check_shared_gpus(grids: Sequence[Grid], backend: str, gpus: int, launcher: Any, probe: Any, spec: ProbeSpec) -> None:
    """PlanError (exit 2, one line) where ranks sharing GPUs as emulated hosts cannot fit: GPU memory (per rank a
    CUDA context, NCCL's buffers and the probe's) or an exclusive compute mode. Asks nvidia-smi only then."""
    if backend != "nccl" or not launcher.emulates_hosts or not any(g.world > gpus for g in grids):
        return
    from envmatrix.execution.hostinfo import gpu_capacity
    from envmatrix.planning.placement import check_capacity, place

    capacity = gpu_capacity()
    for grid in grids:
        check_capacity(place(grid, backend, gpus, True), grid, capacity, probe.rank_buffer_bytes(spec, grid.world))


def check_cpu_memory(grids: Sequence[Grid], backend: str, launcher: Any, probe: Any, spec: ProbeSpec,
                     sizes_from: Optional[str] = None) -> None:
    """PlanError (exit 2) where CPU ranks started on this host could not hold their probe buffers in its memory;
    ``sizes_from`` names what sets the sizes for the command that asks (bench -e, --pair-size)."""
    if backend != "gloo" or ranks_elsewhere(launcher):
        return
    from envmatrix.planning.placement import CONFIG_SIZES, check_host_memory

    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = 0
    for grid in grids:
        check_host_memory(grid, grid.world, probe.rank_buffer_bytes(spec, grid.world), memory, sizes_from or CONFIG_SIZES)


def check_host_namespaces(data: Mapping[str, Any]) -> None:
    """emulate_hosts: {namespaces: true} makes network namespaces, a bridge and veths: root only, said before anything runs."""
    value = ((data.get("launcher_opts") or {}).get("local") or {}).get("emulate_hosts")
    if isinstance(value, Mapping) and value.get("namespaces") is True and os.geteuid() != 0:
        raise PlanError("launcher_opts.local.emulate_hosts.namespaces: true needs root (network namespaces, veth, bridge); "
                        "allowed: emulate_hosts: true (every emulated host in this namespace), or run as root")


def check_emulate_hosts_launcher(data: Mapping[str, Any]) -> None:
    """--emulate-hosts (launcher_opts.local.emulate_hosts) places ranks of the local launcher; any other launcher
    places its ranks itself, so the flag would say nothing there."""
    local = ((data.get("launcher_opts") or {}).get("local") or {})
    launcher = str(data["launcher"])
    if launcher != "local" and local.get("emulate_hosts") not in (None, False):
        raise ConfigError(f"--emulate-hosts (launcher_opts.local.emulate_hosts): only with launcher=local; launcher={launcher} "
                          f"places its ranks itself (emulated nodes there: launcher_opts.{launcher}.emulate)")


def check_launcher_opts(opts: Mapping[str, Any]) -> None:
    """launcher_opts is keyed by launcher name; an option one level too high is named as such."""
    from envmatrix.launchers import get_launcher, launcher_names
    from envmatrix.launchers.shim import COMMON_OPTIONS, ShimLauncher

    for key, value in opts.items():
        if key in launcher_names():
            if value is not None and not isinstance(value, Mapping):
                raise ConfigError(f"launcher_opts.{key}: {value!r} is not a mapping; allowed: options such as "
                                  f"launcher_opts.{key}.extra_args=[...]")
            # Checked here too, not only at launch, so a dry run or another launcher's block is caught early.
            named = get_launcher(key)
            defaults = getattr(named, "option_defaults", None)
            common = COMMON_OPTIONS if isinstance(named, ShimLauncher) else {}
            allowed = {**common, **defaults} if defaults is not None else None
            for opt in (value or {}) if allowed is not None else ():
                if opt not in allowed:
                    raise ConfigError(f"launcher_opts.{key}: unknown key {opt!r}{did_you_mean(str(opt), allowed)}; "
                                      f"allowed: {', '.join(sorted(allowed))}")
            values.hosts(f"launcher_opts.{key}.hosts", (value or {}).get("hosts"))
            continue
        hint = (f" ({key} is a per-launcher option: write launcher_opts.<launcher>.{key}, e.g. launcher_opts.mpirun.{key})"
                if key in COMMON_OPTIONS else did_you_mean(str(key), launcher_names()))
        raise ConfigError(f"launcher_opts: unknown launcher {key!r}{hint}; allowed: {', '.join(launcher_names())}")


def check_pins(setups: Sequence[Setup], pins: Mapping[str, str], where: str) -> None:
    """Config setups: each refusal names ``{where}: setups.NAME.VAR``."""
    for setup in setups:
        check_pinned_atoms(setup.atoms, pins, f"{where}: setups.{setup.name}.")


def check_pinned_atoms(atoms: Sequence[Atom], pins: Mapping[str, str], where: str) -> None:
    """Refuse an atom that changes or unsets a caller's safety pin; ``where`` is the message's prefix up to the
    variable, as the user wrote it (``c.yaml: search.fixed.``, ``--env ``, ``e.env: ``)."""
    for atom in atoms:
        if atom.var in pins and (atom.op == UNSET or atom.value != pins[atom.var]):
            raise ConfigError(
                f"{where}{atom.var}: {atom} would override the safety pin {atom.var}={pins[atom.var]} set by the "
                f"caller; allowed: {atom.var}={pins[atom.var]} or leaving {atom.var} out"
            )
        off = MULTICAST_OFF.get(atom.var)
        if off is not None and atom.op != UNSET and atom.value != off:
            raise ConfigError(
                f"{where}{atom.var}: {atom} would turn NVLink multicast on, which envmatrix never does (it can take a "
                f"shared host's GPUs down); allowed: {atom.var}={off} or leaving {atom.var} out"
            )


def resolve(
    cfg: Any,
    conf_file: Path,
    gpus: int,
    pins: Mapping[str, str],
    allow_unknown: bool = False,
    catalog: Any = None,
    dry_run: bool = False,
) -> SweepInput:
    """``dry_run``: a batch launcher outside its allocation gets placeholder nodes instead of a refusal."""
    from omegaconf import OmegaConf

    from envmatrix.catalog import load_catalog
    from envmatrix.launchers import configure_launcher
    from envmatrix.probes import get_probe
    from envmatrix.strategies import expand_setups

    data = OmegaConf.to_container(cfg, resolve=True)
    where = conf_file.name
    name = check_name(conf_file.stem if data.get("name") is None else data["name"], "name")  # it names the run directory
    check_launcher_opts(data.get("launcher_opts") or {})
    check_emulate_hosts_launcher(data)
    check_host_namespaces(data)
    launcher_opts = dict((data.get("launcher_opts") or {}).get(str(data["launcher"])) or {})
    explicit = None if data["grids"] in ("auto", None) else parse_grids(data["grids"])
    placeholders = max((g.nodes for g in explicit or ()), default=2) if dry_run else 0
    hosts = values.hosts(f"{where}: hosts", data.get("hosts"))
    launcher = configure_launcher(str(data["launcher"]), launcher_opts, hosts, placeholder_nodes=placeholders)
    backend = resolve_backend(str(data["backend"]), gpus, ranks_elsewhere(launcher))
    grids = (auto_grids(gpus if backend == "nccl" else 0, hosts=len(launcher.node_hosts(os.environ)))
             if explicit is None else explicit)
    check_grids_fit(grids, backend, gpus, values.integer(f"{where}: max_local_ranks", data["max_local_ranks"], 1), launcher)
    launcher.check_allocation(grids, backend, os.environ)
    catalog = catalog or load_catalog()
    seed = values.seed(f"{where}: seed", data["seed"])
    setups = expand_setups(data.get("setups") or {}, data.get("strategies") or [], CatalogValues(catalog), seed, where)
    for setup_name in data.get("setups") or {}:
        check_name(setup_name, f"{where}: setups.{setup_name}", strict=False)
    for setup in setups:
        catalog.validate_setup(setup, where=f"{where}: setups.{setup.name}", allow_unknown=allow_unknown)
    check_pins(setups, pins, where)
    probe_params = dict(data.get("probe") or {})
    probe = get_probe(str(probe_params.pop("name", "builtin")))
    spec = probe.spec(probe_params, where="probe", backend=backend)
    probe.check_grids(spec, grids, "probe")
    check_shared_gpus(grids, backend, gpus, launcher, probe, spec)
    check_cpu_memory(grids, backend, launcher, probe, spec)
    from envmatrix.config.expect import parse_expect

    expectations = parse_expect(data.get("expect"), where)
    from envmatrix.config.network import network_axis, parse_options

    network_options = parse_options(data.get("network_options"), f"{where}: network_options")
    conditions = network_axis(data["network"], network_options, f"{where}: network") if data.get("network") else ()
    inp = SweepInput(
        name=name,
        conf_file=conf_file,
        backend=backend,
        grids=tuple(grids),
        setups=tuple(setups),
        probe=spec,
        launcher=str(data["launcher"]),
        seed=seed,
        config=data,
        launcher_opts=launcher_opts,
        hosts=hosts,
        hermetic=bool(data.get("hermetic")),
        expectations=expectations,
        conditions=conditions,
        network_options=network_options,
        configured_launcher=launcher,
    )
    from envmatrix.config.owned import check_launcher_owned, owned_checker

    # checked on every grid of the config: NCCL_HOSTID is the launcher's on a multi-node grid only
    check_launcher_owned(setups, grids, owned_checker(inp, gpus, pins, launcher), lambda s: f"{where}: setups.{s.name}.")
    return inp
