"""``envmatrix bisect``'s lifecycle: from a failing env to every culprit (then a repair), or the first bad version
(app.bisect_versions), or the bad hosts (app.host_bisect).

:func:`bisect` checks the request, resolves the config once and runs the mode asked for; what the command line
shows while it runs arrives through :class:`BisectEvents`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional

from envmatrix import paths as em_paths
from envmatrix.app.inputs import Prepared, allows_ignored, check_probe_runs, named_setup, prepare
from envmatrix.app.outputs import RunOutputs, write_run_outputs
from envmatrix.app.report import stored_cells
from envmatrix import values
from envmatrix.errors import EXIT_FAILURES, EXIT_INCONCLUSIVE, EXIT_OK, ConfigError, did_you_mean


@dataclass(frozen=True)
class BisectRequest:
    overrides: tuple[str, ...] = ()
    failing: Optional[str] = None  # GRID: the setups that failed there in the store's last sweep
    env_file: Optional[str] = None
    versions: Optional[tuple[str, ...]] = None
    versions_file: Optional[str] = None
    hosts: Optional[str] = None  # a host file, or "slurm"
    grid: Optional[str] = None
    setup: Optional[str] = None
    baseline: Optional[str] = None  # a passing SETUP (env bisect) or a recorded RUN_DIR (host bisect)
    tolerance: Optional[str] = None
    version_mode: Optional[str] = None  # with --versions: auto (None), preload or library_path
    probe_cmd: Optional[str] = None
    repeats: int = 1
    max_probes: Optional[int] = None
    json: Optional[str] = None  # where to write the culprit sets (or the version verdict) as JSON
    junit: Optional[str] = None
    no_repair: bool = False
    out: Optional[str] = None
    allow_unknown_vars: bool = False
    allow_ignored_vars: bool = False
    rerun: bool = False
    command_line: str = "envmatrix bisect"  # who holds the store's lock


def _ignore(*_: Any) -> None:
    return None


@dataclass(frozen=True)
class BisectEvents:
    """What happens while a bisect runs, for the command line to show (each default shows nothing)."""

    warn: Callable[[str], None] = _ignore  # varied variables the backend never reads
    probe: Callable[[str, str, Any, bool], None] = _ignore  # (target "name grid", probe label, result, launched)
    report: Callable[[str, str], None] = _ignore  # (a target's report as Markdown, its path), as each target ends
    version: Callable[[str, str, Any], None] = _ignore  # (grid, version path, result)
    host_round: Callable[[Any, Any], None] = _ignore  # (bisect.hosts.Evidence, result)


@dataclass(frozen=True)
class EnvBisectResult:
    reports: list  # bisect.driver.BisectReport, one per target
    outputs: Optional[RunOutputs]  # None: nothing to bisect, nothing written
    exit_code: int
    note: Optional[str] = None  # why there was nothing to bisect


class BisectInput(NamedTuple):
    prepared: Prepared
    probe: Any  # the ProbeSpec each probe runs: the config's, or --probe-cmd's
    baseline: list  # env bisect: the atoms of the passing --baseline setup
    run_dir: str


def bisect(request: BisectRequest, events: BisectEvents = BisectEvents()) -> Any:
    """An EnvBisectResult, app.bisect_versions.VersionBisectResult or app.host_bisect.HostBisectOutcome."""
    given = check_request(request)
    if request.versions or request.versions_file:
        from envmatrix.app.bisect_versions import bisect_versions

        return bisect_versions(request, given, events)
    if request.hosts:
        from envmatrix.app.host_bisect import bisect_hosts

        return bisect_hosts(request, given, events)
    return bisect_envs(request, given, events)


def check_request(request: BisectRequest) -> BisectInput:
    """The request's flags checked against each other and the config resolved: nothing written yet."""
    if request.max_probes is not None and request.max_probes < 2:
        raise ConfigError(f"--max-probes {request.max_probes}: not allowed; allowed: an integer >= 2 (the env and the baseline)")
    if request.repeats < 1:
        raise ConfigError(f"--repeats {request.repeats}: not allowed; allowed: an integer >= 1")
    # an empty word (a variable that expanded to nothing) is not the flag left out
    for flag, value, allowed in (("--failing", request.failing, "a grid such as 2x2"),
                                 ("--env-file", request.env_file, "a file of KEY=VALUE lines"),
                                 ("--versions-file", request.versions_file, "a file of paths"),
                                 ("--hosts", request.hosts, "a host file or 'slurm'"), ("--grid", request.grid, "a grid such as 2x2"),
                                 ("--setup", request.setup, "a setup of the config"),
                                 ("--baseline", request.baseline, "a setup of the config, or a run directory with --hosts"),
                                 ("--probe-cmd", request.probe_cmd, "a command, e.g. 'my_check --fast'")):
        if value is not None and not value.strip():
            raise ConfigError(f"{flag}: {value!r} is empty; allowed: {allowed}, or leave {flag} out")
    if request.version_mode is not None and not (request.versions or request.versions_file):
        raise ConfigError(f"--version-mode {request.version_mode}: only with --versions or --versions-file; allowed: "
                          "drop --version-mode")
    if request.setup is not None and not (request.failing or request.hosts):
        raise ConfigError(f"--setup {request.setup}: only with --failing GRID or --hosts FILE; allowed: drop --setup "
                          "(--env-file bisects the file's env, --versions the builds)")
    for flag, path, kind in (("--json", request.json, "json"), ("--junit", request.junit, "junit")):
        if path is not None:
            values.output_file(flag, path, kind)
    overrides = list(request.overrides)
    grid = request.failing or request.grid
    if grid:  # named by its flag, before it becomes grids=[...] (where '1x2,2x2' would read as two grids)
        from envmatrix.planning.grid import parse_grid

        parse_grid(grid, "--failing" if request.failing else "--grid")
    if grid and not any(o.startswith("grids=") for o in overrides):
        # Only the grid being bisected has to fit this host, not every grid of the config.
        overrides.append(f"grids=[{grid}]")
    if request.tolerance is not None and not request.hosts:
        raise ConfigError(f"--tolerance {request.tolerance}: only with --hosts FILE --baseline RUN_DIR (host bisect's slow floors); "
                          "allowed: drop --tolerance (env bisect's --baseline names a passing setup, not a run)")
    if request.hosts and request.baseline and not os.path.exists(request.baseline):
        raise ConfigError(f"--baseline {request.baseline}: with --hosts a recorded run directory (its busbw less --tolerance "
                          "are the slow floors), and there is none; allowed: the --out of a sweep or bench "
                          "(a passing SETUP is --baseline of env bisect: --failing / --env-file)")
    # Host bisect's --baseline is a recorded run, a setup name everywhere else; host bisect reads it itself
    # (app.host_bisect.pair_baseline: a run that cannot judge its pairs is inconclusive, exit 3, not bad input).
    if request.hosts:
        prepared = prepare(overrides, request.allow_unknown_vars, None, None if request.baseline else request.tolerance)
    else:
        prepared = prepare(overrides, request.allow_unknown_vars)
    inp = prepared.inp
    probe = probe_spec(inp, request.probe_cmd)
    baseline: list = []
    if request.baseline is not None and not request.hosts:
        from envmatrix.strategies import aliased

        baseline = list((aliased(inp.setups, request.baseline)
                         or named_setup(inp, request.baseline, "--baseline", "not a setup of")).atoms)
    run_dir = em_paths.run_dir(request.out, inp.name, create=False)
    if request.failing and not os.path.exists(os.path.join(run_dir, em_paths.STORE_FILE)):
        raise ConfigError(f"--failing {request.failing}: no store at {run_dir}/results.sqlite; run `envmatrix sweep` for this config first or pass --out")
    return BisectInput(prepared, probe, baseline, run_dir)


def probe_spec(inp: Any, probe_cmd: Optional[str]) -> Any:
    from envmatrix.probes import get_probe

    if not probe_cmd:
        return inp.probe
    params = {"command": values.words("--probe-cmd", probe_cmd), "timeout_s": inp.probe.params.get("timeout_s", 120.0)}
    return get_probe("command").spec(params, "--probe-cmd", inp.backend)


def bisect_envs(request: BisectRequest, given: BisectInput, events: BisectEvents) -> EnvBisectResult:
    from envmatrix.bisect.driver import ProbeContext, bisect_env
    from envmatrix.bisect.markdown import render_markdown
    from envmatrix.config.owned import check_atoms_owned
    from envmatrix.config.resolve import check_grids_fit
    from envmatrix.engine import open_session

    (inp, gpus, pins, catalog), run_dir = given.prepared, given.run_dir
    # An env file is checked before the run directory or store exists: bad input writes nothing.
    early = env_file_target(inp, request, catalog) if request.env_file else None
    launcher = inp.make_launcher()  # the one launcher of every probe (the session's too)
    check_probe_runs(given.probe, launcher)
    max_local_ranks = int(inp.config.get("max_local_ranks", 16))
    for _, early_grid, atoms in early or []:
        check_backend(inp, request, atoms, events.warn)
        check_grids_fit([early_grid], inp.backend, len(gpus), max_local_ranks, launcher)
        check_atoms_owned(inp, atoms, early_grid, len(gpus), pins, f"{request.env_file}: ")
    os.makedirs(run_dir, exist_ok=True)
    reports = []
    # The store's lock, as sweep holds it: --failing reads "the last sweep", which a sweep still running into this
    # store has not finished (its later failing setups read as absent: "nothing to bisect", exit 0).
    with open_session(inp, run_dir, pins, len(gpus), probe_spec=given.probe, pool=True, launcher=launcher,
                      lock_for=request.command_line) as session:
        store = session.store
        last_id, last_cells = last_sweep(request, run_dir, store) if request.failing else ("", [])
        targets = early or failing_targets(merged_setup(request, inp.setups), run_dir, last_id, last_cells)
        if not targets:
            return EnvBisectResult([], None, EXIT_OK, f"nothing to bisect: no failing runs for {grid_label(request)} "
                                   f"in {os.path.join(run_dir, em_paths.STORE_FILE)} (last sweep {last_id})")
        for name, grid, atoms in targets:
            if not early:
                check_grids_fit([grid], inp.backend, len(gpus), max_local_ranks, launcher)
            ctx = ProbeContext(session.under(sweep_id=f"bisect-{name}-{grid.label}"), grid, request.rerun)
            if not early:
                check_backend(inp, request, atoms, events.warn)

            def show(label: str, result: Any, fresh: bool = True, _target: str = f"{name} {grid.label}") -> None:
                events.probe(_target, label, result, bool(fresh))

            stored = [r for r in last_cells if r.grid == grid.label and measured_alike(ctx.session, r, grid)]
            report = bisect_env(ctx, name, atoms, given.baseline, request.repeats, not request.no_repair, catalog,
                                on_probe=show, max_probes=request.max_probes, stored=stored)
            reports.append(report)
            path = os.path.join(run_dir, f"bisect_{em_paths.file_safe(name)}_{grid.label}.md")
            markdown = render_markdown(report)
            with open(path, "w") as fh:
                fh.write(markdown)
            with open(path[:-3] + ".json", "w") as fh:  # what `envmatrix report` draws the trail from
                json.dump(report.to_json(), fh, indent=1)
            events.report(markdown, path)
        ids = {f"bisect-{name}-{grid.label}" for name, grid, _ in targets}
        probed = [r for r in store.latest() if r.sweep_id in ids]
        stored = stored_cells(store)  # the page's cells, as `envmatrix report` reads them
    if request.json:
        em_paths.make_parent(request.json)
        with open(request.json, "w") as fh:
            json.dump([r.to_json() for r in reports], fh, indent=1)
    outputs = write_run_outputs(run_dir, request.junit, "envmatrix.bisect", probed, stored)
    return EnvBisectResult(reports, outputs, env_exit_code(reports))


def env_file_target(inp: Any, request: BisectRequest, catalog: Any) -> list[tuple[str, Any, list]]:
    """--env-file: (name, grid, atoms) of the file's assignments, checked like a config setup."""
    from envmatrix.bisect.envfile import parse_env_file
    from envmatrix.config.compose import read_utf8
    from envmatrix.config.resolve import check_pinned_atoms
    from envmatrix.env.atoms import Setup
    from envmatrix.env.merge import caller_pins
    from envmatrix.planning.grid import parse_grid

    path = Path(request.env_file)
    text = read_utf8(path, f"--env-file {path}")
    atoms = list(parse_env_file(text, dict(os.environ), where=str(path)))
    if not atoms:
        raise ConfigError(f"--env-file {path}: no variable assignments in it, so nothing to bisect; "
                          "give a file with export KEY=VALUE or KEY=VALUE lines")
    catalog.validate_setup(Setup(path.stem, tuple(atoms)), where=str(path), allow_unknown=request.allow_unknown_vars)
    check_pinned_atoms(atoms, caller_pins(), f"{path}: ")  # as a config setup would be
    grid = parse_grid(request.grid, "--grid") if request.grid else inp.grids[0]
    return [(path.stem, grid, atoms)]


def last_sweep(request: BisectRequest, run_dir: str, store: Any) -> tuple[str, list]:
    """The id and cells (newest attempts, under the sweep's own setup names) of the store's last sweep."""
    sweeps = store.sweeps()
    # search and host bisect open records of their own; a sweep's lists its runs (records before 0bb4193 do not)
    last = ([s for s in sweeps if "runs" in s["config"]] or sweeps or [None])[-1]
    if last is None:
        raise ConfigError(f"--failing {request.failing}: the store in {run_dir} holds no sweep; run `envmatrix sweep` first or pass --out")
    if "runs" not in last["config"]:
        return last["id"], store.latest(sweep_id=last["id"])
    # A run the sweep found in the store (stored by an earlier sweep, a bisect, a search) carries that command's
    # sweep_id and setup name: its cells are the runs it lists.
    cells = store.latest(run_keys=last["config"]["runs"])
    setups = last["config"].get("setups") or {}
    for cell in cells:
        cell.setup = setups.get(cell.run_key, cell.setup)
    return last["id"], cells


def measured_alike(session: Any, cell: Any, grid: Any) -> bool:
    """A sweep's cell is a free probe only when this bisect would launch that very run for its env: under another
    probe (--probe-cmd, probe.* overrides), backend or launcher it is another measurement."""
    from envmatrix.engine.trial import plan_trial
    from envmatrix.env.atoms import Atom, Setup

    setup = Setup(cell.setup_name, tuple(Atom.from_json(a) for a in cell.setup.get("atoms", [])))
    return plan_trial(session, setup, grid).key == cell.run_key


def merged_setup(request: BisectRequest, setups: Any) -> BisectRequest:
    """--setup naming a generated setup merged into an earlier one of its env: that one's runs are its runs."""
    import dataclasses

    kept = [s.name for s in setups if request.setup is not None and ("alias", request.setup) in s.meta]
    return dataclasses.replace(request, setup=kept[0]) if kept else request


def failing_targets(request: BisectRequest, run_dir: str, sweep_id: str, latest: list) -> list[tuple[str, Any, list]]:
    """--failing GRID: (name, grid, atoms) of each setup that failed there in the store's last sweep."""
    from envmatrix.env.atoms import Atom
    from envmatrix.planning.grid import parse_grid

    grid = parse_grid(request.failing, "--failing")
    swept = sorted({r.grid for r in latest})
    if grid.label not in swept:  # not "nothing failed": nothing ran there, which no exit of 0 may claim
        raise ConfigError(f"--failing {request.failing}: the last sweep in {run_dir} ({sweep_id}) never ran "
                          f"{grid.label}; allowed: a grid it ran ({', '.join(swept) or 'none'}), or sweep {grid.label} first")
    results = [r for r in latest if r.grid == grid.label and not r.passed]
    ran = sorted({r.setup_name for r in latest if r.grid == grid.label})
    if request.setup is not None and request.setup not in ran:  # a typo is bad input, not "nothing failed" (exit 0)
        raise ConfigError(f"--setup {request.setup!r}: the last sweep in {run_dir} ({sweep_id}) never ran it on "
                          f"{grid.label}{did_you_mean(request.setup, ran)}; allowed: {', '.join(ran) or 'none'}")
    if request.setup is not None and results:
        names = [r.setup_name for r in results]
        results = [r for r in results if r.setup_name == request.setup]
        if not results:
            raise ConfigError(f"--setup {request.setup!r}: no failing run on {grid.label}{did_you_mean(request.setup, names)}; failing here: {', '.join(names) or 'none'}")
    return [(r.setup_name, grid, [Atom.from_json(a) for a in r.setup.get("atoms", [])]) for r in results]


def grid_label(request: BisectRequest) -> str:
    from envmatrix.planning.grid import parse_grid

    return parse_grid(request.failing, "--failing").label


def check_backend(inp: Any, request: BisectRequest, atoms: list, warn: Callable[[str], None]) -> None:
    """Warn about atoms the backend ignores; ConfigError when it ignores every one. A command probe reads NCCL_*
    itself, whatever the backend: not checked."""
    if request.probe_cmd:
        return
    from envmatrix.catalog.backends import check_varied

    # the config's allow_ignored_vars covers its own setups (--failing); an --env-file's atoms need the flag
    allow = request.allow_ignored_vars if request.env_file else allows_ignored(inp, request.allow_ignored_vars)
    warning = check_varied(inp.backend, atoms, "bisect", allow=allow, probe=inp.probe.name)
    if warning:
        warn(warning)


def env_exit_code(reports: list) -> int:
    """3 when any bisect is inconclusive, else 1 when culprits were found, else 0 (nothing failing)."""
    if any(r.status not in ("ok", "env passes") or (r.culprits and not r.complete) for r in reports):
        return EXIT_INCONCLUSIVE
    return EXIT_FAILURES if any(r.culprits for r in reports) else EXIT_OK
