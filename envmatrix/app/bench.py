"""``envmatrix bench``'s lifecycle: one setup on one grid, turned into a one-run sweep input per backend
(app.sweep runs it), the store opened once for all backends, each backend's launcher built once."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from envmatrix import paths as em_paths
from envmatrix import values
from envmatrix.app.inputs import check_probe_runs, named_setup, prepare
from envmatrix.app.network_axis import (plan_shaping, shaping_missed, shaping_session, with_flags, with_shaping_missed,
                                        write_condition_tables)
from envmatrix.app.outputs import RunOutputs, write_run_outputs
from envmatrix.app.report import stored_cells
from envmatrix.bench.sizes import size_sweep
from envmatrix.bench.timing import check_timing
from envmatrix.config.resolve import SweepInput, check_cpu_memory, check_grids_fit, check_pinned_atoms
from envmatrix.env.atoms import Setup, atoms_from_mapping
from envmatrix.errors import ConfigError
from envmatrix.planning.grid import auto_grids, parse_grid
from envmatrix.planning.placement import CONFIG_SIZES
from envmatrix.probes import get_probe
from envmatrix.probes.builtin import bench_collectives, bench_dtype, default_max_bytes
from envmatrix.results import ProbeResult


@dataclass(frozen=True)
class BenchRequest:
    overrides: tuple[str, ...] = ()
    grid: Optional[str] = None
    setup: Optional[str] = None
    env: tuple[str, ...] = ()  # KEY=VALUE on top of the setup
    # The bench flags: None when not given, then the config's probe.bench key applies, else the bench's default
    # (BENCH_DEFAULTS: allreduce,allgather,alltoall from 8 bytes, factor 2, 20 iterations, 5 warm-up, float32).
    collectives: Optional[str] = None
    min_bytes: Optional[str] = None
    max_bytes: Optional[str] = None
    factor: Optional[float] = None
    step_bytes: Optional[str] = None
    iters: Optional[int] = None
    warmup: Optional[int] = None
    dtype: Optional[str] = None
    no_check: Optional[bool] = None
    timing: Optional[str] = None
    timeout: Optional[float] = None  # None: the config's probe.timeout_s when the user set it, else 600 s
    backends: Optional[str] = None  # "gloo,nccl": the same bench on each
    out: Optional[str] = None
    allow_unknown_vars: bool = False
    rerun: bool = False
    baseline: Optional[str] = None
    tolerance: Optional[str] = None
    network: tuple[str, ...] = ()  # --network conditions (replace the config's network: axis): each run under each
    # who talks to whom (issue 34): all-to-all over peer groups (planning/peers.py) instead of -c, e.g. "rail,cross"
    peers: Optional[str] = None
    inflight: Optional[int] = None  # messages in flight per rank (default: all at once)
    command_line: str = "envmatrix bench"  # who holds the store's lock


@dataclass(frozen=True)
class BenchRun:
    """One backend's bench: its stored result and the Markdown tables written for it."""

    result: ProbeResult
    report: str  # RUN_DIR/bench_<run key>.md
    title: str
    exit_code: int  # 1 when it failed or a value check found #wrong elements


@dataclass(frozen=True)
class BenchResult:
    runs: list[BenchRun]
    backends_report: Optional[str]  # RUN_DIR/bench_backends.md, with several backends
    outputs: RunOutputs
    exit_code: int
    conditions_report: Optional[str] = None  # RUN_DIR/conditions.md (+ .csv), with a network axis
    shaping_missed: list[str] = dataclasses.field(default_factory=list)  # cells whose condition was not in effect


def bench(request: BenchRequest, listener: Any = None,
          on_run: Callable[[BenchRun], None] = lambda run: None,
          warn: Callable[[str], None] = lambda line: None) -> BenchResult:
    """``on_run`` gets each backend's bench as it finishes (before the next backend starts); ``warn`` the line about
    set variables a backend never reads."""
    from envmatrix.bench.expect import unmeasured_warning
    from envmatrix.bench.formulas import ALL
    from envmatrix.catalog.backends import check_varied
    from envmatrix.config.resolve import ranks_elsewhere, resolve_backend
    from envmatrix.app.sweep import plan_sweep, run_sweep
    from envmatrix.engine import open_session, open_store_at
    from envmatrix.store.lock import exclusive

    base, gpus, pins, catalog = prepare(request.overrides, request.allow_unknown_vars, request.baseline, request.tolerance,
                                        setups_optional=True)
    base = with_flags(base, request.network)
    backends = [b.strip() for b in (base.backend if request.backends is None else request.backends).split(",") if b.strip()]
    if not backends or len(set(backends)) < len(backends):
        raise ConfigError(f"--backends {request.backends!r}: {'no backend' if not backends else 'a backend twice'}; "
                          "allowed: a comma list of distinct backends, e.g. gloo,nccl")
    # Where the ranks run matters only to nccl on a GPU-less host (a login node): only then is it asked.
    inputs = [prepare_bench(dataclasses.replace(base, backend=resolve_backend(
        b, len(gpus), b == "nccl" and not gpus and ranks_elsewhere(base.make_launcher()))), request, len(gpus), catalog)
        for b in backends]
    for inp, _ in inputs:  # a bench measures the one setup it is given: warned, never refused
        warning = check_varied(inp.backend, inp.setups[0].atoms, "bench", allow=True, probe=inp.probe.name)
        if warning:
            warn(warning)
    first = inputs[0][0]  # the bench flags (-c, -b, -e) set what is measured, the same for every backend
    unjudged = unmeasured_warning(first.expectations, first.probe.params.get("bench"), first.probe.name,
                                  {g.label: g.world for g in first.grids})
    if unjudged:
        warn(unjudged)
    alone = [c for c in (first.probe.params.get("bench") or {}).get("collectives") or ()
             if c in ALL and ALL[c].needs_peer and first.grids[0].world < 2]
    if alone:  # the ranks skip them; said here so an empty table is not read as a pass
        warn(f"warning: {', '.join(alone)} need two ranks; grid {first.grids[0]} has one: not measured")
    # a condition that cannot be applied is refused here, before anything is launched or written
    shaping = [plan_shaping(inp, launcher, pins, len(gpus)) for inp, launcher in inputs]
    run_dir = em_paths.run_dir(request.out, "bench")
    runs, code = [], 0
    with exclusive(os.path.join(run_dir, em_paths.STORE_FILE), request.command_line), open_store_at(run_dir) as store:
        for (inp, launcher), plan in zip(inputs, shaping):  # one session per backend: its env and launcher follow it
            with open_session(inp, run_dir, pins, len(gpus), pool=True, launcher=launcher, store=store) as session:
                planned = plan_sweep(inp)
                _, done = run_sweep(inp, shaping_session(session, plan), planned, rerun=request.rerun, listener=listener)
            by_key = {r.run_key: r for r in done}
            for result in [by_key[r.key] for r in planned if r.key in by_key]:  # each condition's, in plan order
                run = write_bench(result, run_dir)
                on_run(run)
                runs.append(run)
                code = max(code, run.exit_code)
        stored = stored_cells(store)  # the page's cells, as `envmatrix report` reads them
    conditions = base.conditions
    backends_report = write_backends([r.result for r in runs], run_dir) if len(runs) > 1 and not conditions else None
    conditions_report = (write_condition_tables(run_dir, [r.result for r in runs], "envmatrix bench: network conditions")[0]
                         if conditions else None)
    missed = shaping_missed([r.result for r in runs]) if conditions else []
    return BenchResult(runs, backends_report, write_run_outputs(run_dir, stored=stored), with_shaping_missed(code, missed),
                       conditions_report, missed)


def write_bench(result: ProbeResult, run_dir: str) -> BenchRun:
    from envmatrix.reporting.bench_tables import bench_markdown

    title = f"envmatrix bench ({result.setup_name}) on {result.grid}, {result.backend}"
    if result.network:
        title += f", network {result.condition_name} ({result.condition_value})"
    path = os.path.join(run_dir, f"bench_{result.run_key}.md")
    with open(path, "w") as fh:
        fh.write(bench_markdown(result, title))
        if any(m.get("peer_group") for m in result.metrics):
            fh.write("\n" + peers_markdown(result.metrics))
    wrong = sum(int(m.get("wrong") or 0) for m in result.metrics)
    return BenchRun(result, path, title, 0 if result.passed and not wrong else 1)


def peers_markdown(metrics: list) -> str:
    """Seed 002's table (GB/s per rank by message size, rail and cross side by side) and each group's peers."""
    from envmatrix.reporting.pairs_tables import markdown_table, peer_lists, peers_table

    lines = "\n".join(f"- {line}" for line in peer_lists(metrics))
    return (f"## peer groups: all-to-all GB/s per rank\n\n{markdown_table(*peers_table(metrics))}\n\n"
            f"Peers of each rank (and whom its received bytes came from):\n\n{lines}\n")


def backends_table(results: list[ProbeResult]) -> tuple[list[str], list[tuple[str, ...]]]:
    """Seed 000's comparison: the same collective and size on each backend (time and busbw)."""
    from envmatrix.bench.sizes import format_size
    from envmatrix.reporting.bench_tables import headline_bw

    cells = {(r.backend, m["collective"], m["size_bytes"]): m for r in results for m in r.metrics}
    keys = sorted({(c, s) for _, c, s in cells})
    header = ["collective", "size"] + [f"{r.backend} {what}" for r in results for what in ("time (us)", "busbw (GB/s)")]
    rows = []
    for collective, size in keys:
        row = [collective, format_size(size)]
        for r in results:
            m = cells.get((r.backend, collective, size))
            bw = None if m is None else headline_bw(m)
            row += ["-" if m is None else f"{m['time_us']:.1f}", "-" if bw is None else f"{bw:.2f}"]
        rows.append(tuple(row))
    return header, rows


def write_backends(results: list[ProbeResult], run_dir: str) -> str:
    from envmatrix.reporting.bench_tables import markdown_table

    path = os.path.join(run_dir, "bench_backends.md")
    with open(path, "w") as fh:
        fh.write("# Backends side by side\n\n" + markdown_table(*backends_table(results)) + "\n")
    return path


def parse_env_flags(items: Sequence[str]) -> dict[str, str]:
    env = {}
    for item in items:
        if "=" not in item or not item.split("=", 1)[0]:
            raise ConfigError(f"--env {item!r}: not KEY=VALUE; allowed: e.g. --env NCCL_ALGO=Ring")
        key, value = item.split("=", 1)
        env[key] = value
    keys = [item.split("=", 1)[0] for item in items]
    repeat = values.first_repeat(keys)
    if repeat is not None:  # the later one would win without a word
        raise ConfigError(f"--env {items[repeat[0]]!r}: {keys[repeat[0]]} is given twice (first --env {items[repeat[1]]}); "
                          "allowed: each variable once")
    return env


def env_flag_atoms(items: Sequence[str], catalog: Any, allow_unknown: bool) -> tuple:
    """The --env atoms, checked under the flag (a config setup they go on top of was checked with its file)."""
    from envmatrix.env.merge import caller_pins

    extra = atoms_from_mapping(parse_env_flags(items), "--env")
    for atom in extra:
        catalog.validate_atom(atom, f"--env {atom.var}", allow_unknown)
    check_pinned_atoms(extra, caller_pins(), "--env ")
    return extra


def with_env(base: Setup, extra: tuple, named: bool) -> Setup:
    """``base`` with the --env atoms on top (theirs win); a ``named`` config setup becomes NAME+env. Without --setup
    the base is the inherited env itself, named "env", and keeps that name ("env+env" said nothing)."""
    atoms = tuple(a for a in base.atoms if a.var not in {e.var for e in extra}) + extra
    return Setup(f"{base.name}+env" if extra and named else base.name, atoms)


def peer_bench(peers: str, grid: Any, inflight: Optional[int]) -> dict[str, Any]:
    """``--peers rail,cross``: the peer all-to-all rows and the driver's plan of who sends what to whom on ``grid``
    (the ranks execute it as given and record it with each row)."""
    from envmatrix.planning.peers import MODES, to_spec

    modes = [m.strip() for m in peers.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    allowed = f"allowed: a comma list of {', '.join(MODES)}, each once"
    if not modes:
        raise ConfigError(f"--peers {peers!r}: names no peer group; {allowed}")
    if bad:
        raise ConfigError(f"--peers {peers!r}: {bad[0]!r} not allowed; {allowed}")
    repeat = values.first_repeat(modes)
    if repeat is not None:  # -c refuses a collective twice; a group twice was dropped without a word
        raise ConfigError(f"--peers {peers!r}: {modes[repeat[0]]!r} is listed twice; {allowed}")
    return {"collectives": [f"alltoall_{m}" for m in modes], "peer_plan": to_spec(grid.nodes, grid.ppn, modes, inflight)}


BENCH_SIZE_FLAGS = {"min_bytes": "-b/--min-bytes", "max_bytes": "-e/--max-bytes", "factor": "-f/--factor",
                    "step_bytes": "-i/--step-bytes"}


def prepare_bench(inp: SweepInput, args: BenchRequest, gpus: int, catalog: Any) -> tuple[SweepInput, Any]:
    """The one-run sweep input of the bench and its launcher (checked: the grid fits where it puts the ranks)."""
    from envmatrix.config.owned import check_atoms_owned
    from envmatrix.env.merge import caller_pins
    from envmatrix.strategies import aliased

    # a generated setup merged into an earlier one of the same env is still a setup of the config
    base = (aliased(inp.setups, args.setup) or named_setup(inp, args.setup)) if args.setup is not None else Setup("env")
    extra = env_flag_atoms(args.env, catalog, args.allow_unknown_vars)
    setup = with_env(base, extra, named=args.setup is not None)
    grid = parse_grid(args.grid, "--grid") if args.grid is not None else (inp.grids[0] if inp.grids else auto_grids(gpus)[0])
    inp = dataclasses.replace(inp, name="bench", grids=(grid,), setups=(setup,))
    launcher = inp.make_launcher()
    check_grids_fit([grid], inp.backend, gpus, int(inp.config.get("max_local_ranks", 16)), launcher)
    # the config checked its setup on its own grids; --grid may be another (NCCL_HOSTID is the launcher's on 2x1)
    check_atoms_owned(inp, extra, grid, gpus, caller_pins(), "--env ")
    check_atoms_owned(inp, base.atoms, grid, gpus, caller_pins(), f"{inp.conf_file.name}: setups.{base.name}.")
    if args.factor is not None and args.step_bytes is not None:
        raise ConfigError(f"-i/--step-bytes {args.step_bytes}: given with -f/--factor {args.factor}, and sizes either "
                          "multiply or add; allowed: one of them (nccl-tests' -f or -i)")
    params, configured = config_probe(inp, args.overrides)
    bench, names = bench_from_flags(args, params.pop("bench", None) or {}, inp.backend)
    size_sweep(bench["min_bytes"], bench["max_bytes"] or default_max_bytes(inp.backend), bench["factor"], bench["step_bytes"],
               names)
    if args.peers is not None:
        bench.update(peer_bench(args.peers, grid, args.inflight))
    elif args.inflight is not None:
        raise ConfigError(f"--inflight {args.inflight}: only with --peers; allowed: --peers rail,cross --inflight N")
    builtin = get_probe("builtin")
    params.update(bench=bench, timeout_s=probe_timeout(args.timeout, params, configured))
    if "collectives" not in configured:
        params["collectives"] = ["allreduce"]  # the checks before the bench: one, unless the config lists them
    probe = builtin.spec(params, "bench", inp.backend)
    check_cpu_memory([grid], inp.backend, launcher, builtin, probe, "bench -e / " + CONFIG_SIZES)
    check_probe_runs(probe, launcher)
    return dataclasses.replace(inp, probe=probe), launcher


BENCH_FLAGS = {"collectives": "-c/--collectives", "min_bytes": "-b/--min-bytes", "max_bytes": "-e/--max-bytes",
               "factor": "-f/--factor", "step_bytes": "-i/--step-bytes", "iters": "-n/--iters", "warmup": "-w/--warmup",
               "dtype": "-d/--dtype", "check": "--no-check", "timing": "--timing"}
DEFAULT_TIMEOUT_S = 600.0  # a bench's size sweep runs longer than a sweep's checks (the builtin probe's 120 s)
COMMON_PROBE_KEYS = ("timeout_s", "grace_s")  # every probe's (probes.base), so a config's other probe has them too


def user_probe_keys(overrides: Sequence[str], conf_file: Any) -> set[str]:
    """The probe: keys the user set: in the conf file chosen (its defaults list applied) or as probe overrides. The
    packaged default config is nobody's choice and the probe group fills every key: those are not the user's."""
    import yaml

    from envmatrix.config.compose import CONF_DIR, DEFAULT_CONF, load_yaml_mapping

    keys: set[str] = set()
    default = (CONF_DIR / f"{DEFAULT_CONF}.yaml").resolve()
    if conf_file is not None and os.path.isfile(conf_file) and os.path.realpath(conf_file) != str(default):
        probe = load_yaml_mapping(conf_file).get("probe")
        keys |= set(probe) if isinstance(probe, dict) else set()
    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if key.startswith("probe."):
            keys.add(key.split(".")[1])
        elif key == "probe":
            try:
                given = yaml.safe_load(value)
            except yaml.YAMLError:
                given = None
            keys |= set(given) if isinstance(given, dict) else set()
    return keys


def config_probe(inp: SweepInput, overrides: Sequence[str]) -> tuple[dict[str, Any], set[str]]:
    """(the config's probe parameters bench runs with, the keys of them the user set). The builtin probe's are all
    taken (its run keys: nccl_debug, forbid_transport, teardown, ...; probe.bench under the bench flags); another
    probe's (a command) only its timeout_s and grace_s, since bench measures with the builtin probe."""
    configured = user_probe_keys(overrides, inp.conf_file)
    params = dict(inp.probe.params)
    if inp.probe.name != "builtin":
        params = {k: v for k, v in params.items() if k in COMMON_PROBE_KEYS}
        configured &= set(COMMON_PROBE_KEYS)
    if isinstance(params.get("bench"), dict):
        params["bench"] = {k: v for k, v in params["bench"].items() if k != "sizes"}  # made again from the sizes
    return params, configured


def probe_timeout(flag: Optional[float], params: dict[str, Any], configured: set[str]) -> float:
    """--timeout when given, else the config's probe.timeout_s when the user set it, else bench's 600 s."""
    if flag is not None:
        return values.duration("--timeout", flag)
    return float(params["timeout_s"]) if "timeout_s" in configured else DEFAULT_TIMEOUT_S


def bench_from_flags(args: BenchRequest, configured: dict[str, Any],
                     backend: str) -> tuple[dict[str, Any], dict[str, str]]:
    """probe.bench as bench runs it: each flag given replaces its key of the config's probe.bench (checked under the
    flag's name), the rest come from there or BENCH_DEFAULTS; and the name of each size key's source, for errors."""
    from envmatrix.probes.builtin import BENCH_DEFAULTS

    flags = {
        "collectives": None if args.collectives is None else bench_collectives(
            [c.strip() for c in args.collectives.split(",") if c.strip()], "-c/--collectives"),
        "min_bytes": None if args.min_bytes is None else values.size("-b/--min-bytes", args.min_bytes),
        "max_bytes": None if args.max_bytes is None else values.size("-e/--max-bytes", args.max_bytes),
        "factor": None if args.factor is None else values.number("-f/--factor", args.factor, above=1),
        "step_bytes": None if args.step_bytes is None else values.size("-i/--step-bytes", args.step_bytes),
        "iters": None if args.iters is None else values.integer("-n/--iters", args.iters, minimum=1),
        "warmup": None if args.warmup is None else values.integer("-w/--warmup", args.warmup, minimum=0),
        "dtype": None if args.dtype is None else bench_dtype(args.dtype, "-d/--dtype"),
        "check": None if args.no_check is None else not args.no_check,
        "timing": None if args.timing is None else check_timing(args.timing, backend, "--timing"),
    }
    given = {k: v for k, v in flags.items() if v is not None}
    if "factor" in given:
        configured = {**configured, "step_bytes": None}  # -f says multiply: the config's additive step goes
    bench = {k: v for k, v in {**BENCH_DEFAULTS, **configured, **given}.items() if k in BENCH_FLAGS}
    names = {k: BENCH_FLAGS[k] if k in given or k not in configured else f"probe.bench.{k}" for k in BENCH_SIZE_FLAGS}
    return bench, names
