"""``envmatrix bisect``: from a failing env to every culprit, then a repair."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from envmatrix import paths as em_paths
from envmatrix.errors import EXIT_FAILURES, EXIT_INCONCLUSIVE, EXIT_OK, ConfigError, did_you_mean
from envmatrix.reporting.console import probe_line

EXAMPLES = """Every failure signature (outcome + root-cause line) gets its own culprit search; an init failure masks later
ones, so once a signature's culprits are proven the env without them is probed and bisected again until it passes.
bisect exits 1 when culprits were found, 0 when nothing fails (nothing to bisect), 3 when inconclusive (probe cap
reached, culprits unproven, no passing repaired env), 2 on bad input.
With --versions: 1 when a first bad version is named, 0 when the last version is good, 3 when skipped versions
leave several candidates or an end cannot be used (versions[0] bad or skipped, last version skipped).

examples:
  envmatrix bisect conf=aws_ofi --failing 2x2                  # failing setups of the last sweep on 2x2
  envmatrix bisect conf=aws_ofi --failing 2x2 --setup 0 --baseline 3
  envmatrix bisect --grid 2x2 --env-file seed003_env0.sh       # KEY=VALUE / export lines as pasted
  envmatrix bisect --grid 1x2 --env-file env.sh --probe-cmd 'my_check --fast' --repeats 3
  envmatrix bisect --grid 2x2 --versions /opt/nccl/2.27/lib /opt/nccl/2.28/lib /opt/nccl/2.29/lib
  envmatrix bisect --hosts hosts.txt conf=aws_ofi launcher=mpirun --grid 1x8   # which hosts / host pairs fail
  envmatrix bisect --hosts slurm launcher=srun                                 # the nodes of this allocation
  envmatrix bisect --hosts hosts.txt conf=aws_ofi --baseline reports/runs/good --tolerance 10%   # slow against a run

With --hosts: all hosts in disjoint pairs at once, each host of a failing pair with a known-good one, then the
culprits alone beside the rest together (a bad link: halves of the failing set at once); prints each host ok / failing / slow with its evidence runs, an `exclude:` line (a Slurm --exclude
string) and a hostfile without them. A group is slow below the config's expect: floors or, with --baseline RUN_DIR,
the busbw of that recorded run less --tolerance (default 10%) for the same setup, grid and backend. Exit 1 when culprit hosts or links are found, 0 none, 3 inconclusive.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bisect",
        help="find every culprit atom of a failing env (and repair it), or the first bad NCCL/plugin version",
        description="Bisect a failing environment to its minimal failing atom sets with few probes; each answer is "
        "proven by probes. Each variable assignment and each path entry is one atom.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides choosing the config (conf=..., backend=..., probe.timeout_s=...)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--failing", metavar="GRID", help="bisect the setups that failed on GRID in the last sweep of the store")
    src.add_argument("--env-file", metavar="FILE", help="KEY=VALUE lines (export prefixes, quotes, comments, $VAR) to bisect; needs --grid")
    src.add_argument("--versions", nargs="+", metavar="PATH", help="ordered NCCL library / plugin paths (first good ... last bad)")
    src.add_argument("--versions-file", metavar="FILE", help="the same, one path per line")
    src.add_argument("--hosts", metavar="FILE", help="find the bad hosts and host pairs among these: one host a line (HOST, HOST N, HOST:N, "
                     "an MPI hostfile's HOST slots=N), or 'slurm' for the nodes of SLURM_JOB_NODELIST; --grid 1xP sets ranks per host")
    p.add_argument("--grid", help="NxP for --env-file / --versions (default: the config's first grid)")
    p.add_argument("--setup", help="with --failing: only this setup")
    p.add_argument("--baseline", metavar="SETUP|RUN_DIR", help="env bisect: a passing SETUP of the config to bisect against "
                   "(default: empty env); with --hosts: a recorded RUN_DIR whose busbw points less --tolerance are floors, "
                   "below them a host group is slow (as sweep/bench --baseline)")
    p.add_argument("--tolerance", metavar="PCT", help="with --hosts --baseline RUN_DIR: allowed drop, e.g. 10%% (default), 2.5 or 0.05")
    p.add_argument("--version-mode", choices=("auto", "preload", "library_path"), default="auto", help="how --versions paths are applied")
    p.add_argument("--probe-cmd", metavar="CMD", help="command each rank runs instead of the built-in probe (exit 0 pass, 125 unresolved, else fail)")
    p.add_argument("--repeats", type=int, default=1, help="settle each probe by majority of up to 2K-1 runs (flaky probes)")
    p.add_argument("--max-probes", type=int, metavar="N", help="cap on probes of the search and peeling (default: max(24, 4*ceil(log2(1+n+n(n-1)/2))) "
                   "for n atoms, 4x the bits naming up to two culprit atoms; times 4K with --repeats K); at the cap the report lists what is proven and the "
                   "atoms still suspect, exit 3. Repair probes come after the cap (--no-repair skips them)")
    p.add_argument("--json", metavar="PATH", help="write culprit sets, probes launched and the trail as JSON")
    p.add_argument("--junit", metavar="PATH", help="also write JUnit XML: one testcase per probed (setup, grid), the root-cause line as message")
    p.add_argument("--no-repair", action="store_true", help="skip trying other values of each culprit")
    p.add_argument("--out", metavar="DIR", help="run directory / store (default: reports/runs/<name>)")
    p.add_argument("--allow-unknown-vars", action="store_true", help="let site-specific variables through")
    p.add_argument("--allow-ignored-vars", action="store_true",
                   help="bisect even when the backend reads none of the variables (e.g. to check env delivery)")
    p.add_argument("--rerun", action="store_true", help="probe again even when the store has the same env")
    p.set_defaults(func=cmd_bisect)


def _probe_spec(inp: Any, args: argparse.Namespace):
    from envmatrix.probes import get_probe

    if not args.probe_cmd:
        return inp.probe
    params = {"command": shlex.split(args.probe_cmd), "timeout_s": inp.probe.params.get("timeout_s", 120.0)}
    return get_probe("command").spec(params, "--probe-cmd", inp.backend)


def _targets(inp: Any, args: argparse.Namespace, run_dir: str, store: Any, catalog: Any) -> list[tuple[str, Any, list]]:
    """(name, grid, atoms) to bisect."""
    from envmatrix.bisect.envfile import parse_env_file
    from envmatrix.config.compose import read_utf8
    from envmatrix.env.atoms import Atom, Setup
    from envmatrix.planning.grid import parse_grid

    if args.env_file:
        path = Path(args.env_file)
        text = read_utf8(path, f"--env-file {path}")
        atoms = list(parse_env_file(text, dict(os.environ), where=str(path)))
        if not atoms:
            raise ConfigError(f"--env-file {path}: no variable assignments in it, so nothing to bisect; "
                              "give a file with export KEY=VALUE or KEY=VALUE lines")
        catalog.validate_setup(Setup(path.stem, tuple(atoms)), where=str(path), allow_unknown=args.allow_unknown_vars)
        from envmatrix.config.resolve import check_pins
        from envmatrix.env.merge import caller_pins

        check_pins([Setup(path.stem, tuple(atoms))], caller_pins(), str(path))  # as a config setup would be
        grid = parse_grid(args.grid, "--grid") if args.grid else inp.grids[0]
        return [(path.stem, grid, atoms)]
    grid = parse_grid(args.failing, "--failing")
    sweeps = store.sweeps()
    if not sweeps:
        raise ConfigError(f"--failing {args.failing}: the store in {run_dir} holds no sweep; run `envmatrix sweep` first or pass --out")
    results = [r for r in store.latest(sweep_id=sweeps[-1]["id"]) if r.grid == grid.label and not r.passed]
    if args.setup is not None:
        names = [r.setup_name for r in results]
        results = [r for r in results if r.setup_name == args.setup]
        if not results:
            raise ConfigError(f"--setup {args.setup!r}: no failing run on {grid.label}{did_you_mean(args.setup, names)}; failing here: {', '.join(names) or 'none'}")
    if not results:
        raise ConfigError(f"--failing {grid.label}: nothing failed on {grid.label} in the last sweep ({sweeps[-1]['id']}); nothing to bisect")
    return [(r.setup_name, grid, [Atom.from_json(a) for a in r.setup.get("atoms", [])]) for r in results]


def cmd_bisect(args: argparse.Namespace) -> int:
    from envmatrix.bisect.driver import ProbeContext, bisect_env
    from envmatrix.bisect.report import render_markdown
    from envmatrix.catalog import load_catalog
    from envmatrix.cli.common import make_console, prepare
    from envmatrix.engine import open_session

    if args.max_probes is not None and args.max_probes < 2:
        raise ConfigError(f"--max-probes {args.max_probes}: not allowed; allowed: an integer >= 2 (the env and the baseline)")
    if args.repeats < 1:
        raise ConfigError(f"--repeats {args.repeats}: not allowed; allowed: an integer >= 1")
    console = make_console()
    grid = args.failing or args.grid
    if grid and not any(o.startswith("grids=") for o in args.overrides):
        # Only the grid being bisected has to fit this host, not every grid of the config.
        args.overrides = [*args.overrides, f"grids=[{grid}]"]
    if args.tolerance is not None and not args.hosts:
        raise ConfigError(f"--tolerance {args.tolerance}: only with --hosts FILE --baseline RUN_DIR (host bisect's slow floors); "
                          "allowed: drop --tolerance (env bisect's --baseline names a passing setup, not a run)")
    if args.hosts and args.baseline and not os.path.exists(args.baseline):
        raise ConfigError(f"--baseline {args.baseline}: with --hosts a recorded run directory (its busbw less --tolerance "
                          "are the slow floors), and there is none; allowed: the --out of a sweep or bench "
                          "(a passing SETUP is --baseline of env bisect: --failing / --env-file)")
    # Host bisect judges slow like sweep/bench: --baseline is a recorded run there, a setup name everywhere else.
    inp, gpus, pins = prepare(args, args.baseline, args.tolerance) if args.hosts else prepare(args)
    catalog = load_catalog()
    probe = _probe_spec(inp, args)
    baseline: list = []
    if args.baseline is not None and not args.hosts:
        named = {s.name: s for s in inp.setups}
        if args.baseline not in named:
            raise ConfigError(f"--baseline {args.baseline!r}: not a setup of {inp.conf_file.name}{did_you_mean(args.baseline, named)}; allowed: {', '.join(named)}")
        baseline = list(named[args.baseline].atoms)
    run_dir = em_paths.run_dir(args.out, inp.name, create=False)
    if args.failing and not os.path.exists(os.path.join(run_dir, "results.sqlite")):
        raise ConfigError(f"--failing {args.failing}: no store at {run_dir}/results.sqlite; run `envmatrix sweep` for this config first or pass --out")
    if args.versions or args.versions_file:
        from envmatrix.cli.bisect_versions import run_version_bisect

        from envmatrix.reporting.html import after_command

        code = run_version_bisect(args, inp, gpus, pins, probe, run_dir, console)
        after_command(run_dir, console)
        return code
    if args.hosts:
        return _host_bisect(args, inp, gpus, pins, run_dir, console)
    # An env file is checked before the run directory or store exists: bad input writes nothing.
    early = _targets(inp, args, run_dir, None, catalog) if args.env_file else None
    from envmatrix.config.resolve import check_grids_fit

    max_local_ranks = int(inp.config.get("max_local_ranks", 16))
    for _, early_grid, atoms in early or []:
        _check_backend(inp, args, atoms)
        check_grids_fit([early_grid], inp.backend, len(gpus), max_local_ranks, inp.make_launcher())
    os.makedirs(run_dir, exist_ok=True)
    reports = []
    with open_session(inp, run_dir, pins, len(gpus), probe_spec=probe, pool=True) as session:
        store = session.store
        targets = early or _targets(inp, args, run_dir, store, catalog)
        for name, grid, atoms in targets:
            if not early:
                check_grids_fit([grid], inp.backend, len(gpus), max_local_ranks, session.launcher)
            ctx = ProbeContext(session.under(sweep_id=f"bisect-{name}-{grid.label}"), grid, args.rerun)

            if not early:
                _check_backend(inp, args, atoms)

            def show(label: str, result: Any, fresh: bool = True, _name: str = name, _grid: str = grid.label) -> None:
                console.print(probe_line(f"{_name} {_grid}", label, result, launched=bool(fresh)), markup=False)

            stored = [r for r in store.latest(sweep_id=store.sweeps()[-1]["id"]) if r.grid == grid.label] if args.failing else []
            report = bisect_env(ctx, name, atoms, baseline, args.repeats, not args.no_repair, catalog, on_probe=show,
                                max_probes=args.max_probes, stored=stored)
            reports.append(report)
            md = render_markdown(report)
            path = os.path.join(run_dir, f"bisect_{_safe(name)}_{grid.label}.md")
            with open(path, "w") as fh:
                fh.write(md)
            with open(path[:-3] + ".json", "w") as fh:  # what `envmatrix report` draws the trail from
                json.dump(report.to_json(), fh, indent=1)
            from rich.markdown import Markdown

            console.print(Markdown(md))
            console.print(f"report: {path}")
        ids = {f"bisect-{name}-{grid.label}" for name, grid, _ in targets}
        probed = [r for r in store.latest() if r.sweep_id in ids]
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([r.to_json() for r in reports], fh, indent=1)
    from envmatrix.reporting.html import after_command

    after_command(run_dir, console, args.junit, "envmatrix.bisect", probed)
    return exit_code(reports)


def _read_hosts(spec: str) -> list[tuple[str, Any]]:
    from envmatrix.bisect.hosts import parse_host_list
    from envmatrix.config.compose import read_utf8

    if spec == "slurm":
        from envmatrix.launchers.allocation import expand_nodelist

        nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
        if not nodelist:
            raise ConfigError("--hosts slurm: SLURM_JOB_NODELIST is not set; run inside salloc/sbatch or pass a host file")
        return [(h, None) for h in expand_nodelist(nodelist)]
    return parse_host_list(read_utf8(Path(spec), f"--hosts {spec}"), spec)


def _host_bisect(args: argparse.Namespace, inp: Any, gpus: list, pins: Any, run_dir: str, console: Any) -> int:
    from envmatrix.app.host_bisect import HOST_LAUNCHERS, run_host_bisect, write_outputs
    from envmatrix.planning.grid import parse_grid

    listed = _read_hosts(args.hosts)
    hosts, slots = [h for h, _ in listed], dict(listed)
    if len(hosts) < 2:
        raise ConfigError(f"--hosts {args.hosts}: {len(hosts)} host; host bisect needs at least 2")
    if inp.launcher not in HOST_LAUNCHERS:
        raise ConfigError(f"--hosts: launcher={inp.launcher} runs on this host only; allowed: launcher={', '.join(HOST_LAUNCHERS)}")
    ppn = (parse_grid(args.grid, "--grid") if args.grid else inp.grids[0]).ppn
    short = [h for h in hosts if slots.get(h) and slots[h] < ppn]
    if short:
        raise ConfigError(f"--hosts {args.hosts}: {short[0]} has {slots[short[0]]} slots but {ppn} ranks per host are asked; "
                          f"allowed: --grid 1xP with P <= the smallest slots")
    named = {s.name: s for s in inp.setups}
    if args.setup is not None and args.setup not in named:
        raise ConfigError(f"--setup {args.setup!r}: not a setup of {inp.conf_file.name}{did_you_mean(args.setup, named)}; allowed: {', '.join(named)}")
    setup = named[args.setup] if args.setup is not None else inp.setups[0]
    def show(evidence: Any, result: Any) -> None:
        cause = (result.root_cause or {}).get("line") or ""
        console.print(f"round {evidence.round}: {','.join(evidence.hosts)}: {evidence.verdict}"
                      + (f" ({result.outcome}: {cause})" if evidence.verdict != "ok" else ""), markup=False, soft_wrap=True)

    result = run_host_bisect(inp, hosts, ppn, setup, run_dir, pins, len(gpus), show)
    hostfile, report = write_outputs(result, run_dir, slots)
    for name in hosts:
        verdict = result.verdicts[name]
        evidence = ", ".join(e.run for e in verdict.evidence if e.verdict != "ok")[:300]
        console.print(f"{name}: {verdict.status}" + (f" ({verdict.why}; evidence: {evidence})" if verdict.status != "ok" else ""),
                      markup=False, soft_wrap=True)
    console.print(f"{result.rounds} rounds, {result.runs} runs" + (f"; {result.note}" if result.note else ""), markup=False)
    console.print(result.exclude_line, markup=False, soft_wrap=True)
    console.print(f"hostfile without them: {hostfile}\nreport: {report}", markup=False, soft_wrap=True)
    if not result.complete:
        return EXIT_INCONCLUSIVE
    return EXIT_FAILURES if result.culprits else EXIT_OK


def _check_backend(inp: Any, args: argparse.Namespace, atoms: list) -> None:
    """Warn (stderr) about atoms the backend ignores; ConfigError when it ignores every one. A command probe
    reads NCCL_* itself, whatever the backend: not checked."""
    if args.probe_cmd:
        return
    from envmatrix.catalog.backends import check_varied

    warning = check_varied(inp.backend, atoms, "bisect", allow=args.allow_ignored_vars, probe=inp.probe.name)
    if warning:
        print(warning, file=sys.stderr)


def exit_code(reports: list) -> int:
    """3 when any bisect is inconclusive, else 1 when culprits were found, else 0 (nothing failing)."""
    if any(r.status not in ("ok", "env passes") or (r.culprits and not r.complete) for r in reports):
        return EXIT_INCONCLUSIVE
    return EXIT_FAILURES if any(r.culprits for r in reports) else EXIT_OK


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40]
