"""``envmatrix bisect --hosts``' lifecycle: host bisect's rounds as real launches (one per host group, a round at
once), then a hostfile without the culprits and a JSON report.

When the probe measures bandwidth (``probe.bench``), each group's figure goes with its verdict and slow hosts are
judged relatively in the pair rounds (bisect.hosts). ``--baseline RUN_DIR`` must hold figures of the same pairs
(2xP, the setup, backend, collective and size the probe measures): the pairs' median is held against them (a
fabric-wide slowdown no host explains) and its floors judge the other groups; a run recorded on another shape,
or without bandwidth figures, cannot judge these pairs: exit 3 before anything runs, saying why.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from envmatrix.bisect.hosts import FAILING, OK, SLOW, UNRESOLVED, Evidence, HostBisectResult, localise
from envmatrix.errors import EXIT_FAILURES, EXIT_INCONCLUSIVE, EXIT_OK, ConfigError, EnvmatrixError
from envmatrix.planning.grid import Grid
from envmatrix.results import LAUNCH_ERROR, PASS, UNRESOLVED as RUN_UNRESOLVED, ProbeResult

SLOW_OUTCOME = "slow"  # a measured cell below its expect:/--baseline floor (judgement.thresholds.judge)
HOST_LAUNCHERS = ("mpirun", "mpiexec", "srun")


class CannotJudge(EnvmatrixError):
    """The --baseline run has no figures these host groups can be judged against: inconclusive, nothing run."""

    exit_code = EXIT_INCONCLUSIVE


@dataclass(frozen=True)
class PairBaseline:
    """What --baseline holds for the pairs: the median of its pair figures at the probe's point, and the
    tolerance below it that a whole fleet's pairs may drop."""

    run_dir: str
    gbps: float
    tolerance_pct: float
    point: tuple[str, int]  # (collective, size) the figures are at


@dataclass(frozen=True)
class HostBisectOutcome:
    hosts: list[str]  # as listed
    result: HostBisectResult
    hostfile: str  # RUN_DIR/hosts_ok.txt: the hosts without the culprits
    report: str  # RUN_DIR/host_bisect.json
    exit_code: int


def bisect_hosts(request: Any, given: Any, events: Any) -> HostBisectOutcome:
    """``request``/``given``/``events``: app.bisect's BisectRequest, BisectInput and BisectEvents."""
    from envmatrix.app.inputs import named_setup
    from envmatrix.planning.grid import parse_grid

    (inp, gpus, pins, _), run_dir = given.prepared, given.run_dir
    listed = read_hosts(request.hosts)
    hosts, slots = [h for h, _ in listed], dict(listed)
    if len(hosts) < 2:
        raise ConfigError(f"--hosts {request.hosts}: {len(hosts)} host; host bisect needs at least 2")
    if inp.launcher not in HOST_LAUNCHERS:
        raise ConfigError(f"--hosts: launcher={inp.launcher} runs on this host only; allowed: launcher={', '.join(HOST_LAUNCHERS)}")
    ppn = (parse_grid(request.grid, "--grid") if request.grid else inp.grids[0]).ppn
    short = [h for h in hosts if slots.get(h) and slots[h] < ppn]
    if short:
        raise ConfigError(f"--hosts {request.hosts}: {short[0]} has {slots[short[0]]} slots but {ppn} ranks per host are asked; "
                          f"allowed: --grid 1xP with P <= the smallest slots")
    setup = named_setup(inp, request.setup, "--setup", "not a setup of") if request.setup is not None else inp.setups[0]
    point = measured_point(inp.probe)
    baseline = None
    if request.baseline:
        baseline, floors = pair_baseline(request.baseline, request.tolerance, point, Grid(2, ppn), setup.name, inp.backend)
        inp = dataclasses.replace(inp, expectations=inp.expectations + floors)
    elif point is None:
        events.warn("bisect --hosts: the probe measures no bandwidth (probe.bench unset): hosts are judged by their failures "
                    "only; set probe.bench (e.g. probe.bench.max_bytes=1M) to find slow hosts")
    result = run_host_bisect(inp, hosts, ppn, setup, run_dir, pins, len(gpus), events.host_round, request.command_line)
    if baseline is not None:
        result = against_baseline(result, baseline)
    hostfile, report = write_outputs(result, run_dir, slots)
    code = EXIT_INCONCLUSIVE if not result.complete else EXIT_FAILURES if result.culprits else EXIT_OK
    return HostBisectOutcome(hosts, result, hostfile, report, code)


def read_hosts(spec: str) -> list[tuple[str, Any]]:
    """(host, slots or None) of a host file, or of SLURM_JOB_NODELIST for ``slurm``."""
    from envmatrix.planning.hostlist import parse_host_list
    from envmatrix.config.compose import read_utf8

    if spec == "slurm":
        from envmatrix.launchers.allocation import expand_nodelist

        nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
        if not nodelist:
            raise ConfigError("--hosts slurm: SLURM_JOB_NODELIST is not set; run inside salloc/sbatch or pass a host file")
        return [(h, None) for h in expand_nodelist(nodelist)]
    return parse_host_list(read_utf8(Path(spec), f"--hosts {spec}"), spec)


def measured_point(probe: Any) -> Optional[tuple[str, int]]:
    """(collective, size) whose bandwidth is a group's figure: the probe's first collective at its largest size;
    None when the probe measures no bandwidth."""
    bench = (probe.params or {}).get("bench")
    if not bench:
        return None
    sizes = bench.get("sizes") or [bench.get("max_bytes")]
    return str(bench["collectives"][0]), int(max(s for s in sizes if s))


def group_figure(result: ProbeResult, point: Optional[tuple[str, int]]) -> Optional[float]:
    """The group's bandwidth at ``point`` (GB/s), at its median iteration where the run timed iterations: one stalled
    iteration on a busy machine does not make a pair slow (a slow link is slow every iteration)."""
    from envmatrix.bench.aggregate import headline_bw, headline_rows

    if point is None or result.outcome not in (PASS, SLOW_OUTCOME):
        return None
    for m in headline_rows(result.metrics):
        if (str(m.get("collective")), int(m.get("size_bytes") or 0)) == point and headline_bw(m):
            mean, median = m.get("time_us"), m.get("time_median_us")
            return float(headline_bw(m)) * (mean / median if mean and median else 1.0)
    return None


def pair_baseline(run_dir: str, tolerance: Optional[str], point: Optional[tuple[str, int]], pair: Grid, setup: str,
                  backend: str) -> tuple[PairBaseline, tuple]:
    """The --baseline run's figure for these pairs and its floors for every group; CannotJudge (exit 3) when it
    holds no figure of the same pairs, saying what it holds instead."""
    from envmatrix.app.report import load_results
    from envmatrix.judgement.thresholds import BUSBW, baseline_expectations, measured_points, parse_percent
    from envmatrix.reporting.html_model import cell_results

    tolerance_pct = parse_percent("10%" if tolerance is None else tolerance, "--tolerance")
    where = f"cannot judge against --baseline {run_dir}"
    if point is None:
        raise CannotJudge(f"{where}: the probe measures no bandwidth (probe.bench unset), so there is nothing to hold "
                          "against it; set probe.bench as the baseline run did")
    # a run whose ranks shared GPUs (emulated hosts) has figures, but none that a real run should be held to
    results = [r for r in cell_results(load_results(run_dir, "--baseline")) if not r.shared_gpu and r.outcome in (PASS, SLOW_OUTCOME)]
    measured = [r for r in results if any(k[2] == BUSBW for k in measured_points(r))]
    if not measured:
        raise CannotJudge(f"{where}: it holds no passing run with bandwidth figures ({len(results)} passing runs, none "
                          "measured); record one with probe.bench on healthy hosts (bisect --hosts, or bench --grid "
                          f"{pair})")
    same = [r for r in measured if (r.grid, r.setup_name, r.backend) == (str(pair), setup, backend)]
    if not same:
        shapes = sorted({f"{r.grid} {r.setup_name} {r.backend}" for r in measured})
        raise CannotJudge(f"{where}: it was recorded on {', '.join(shapes[:6])}, and host bisect judges {pair} pairs of "
                          f"setup {setup} on {backend}; record the baseline on {pair} (bisect --hosts on healthy hosts, or "
                          f"bench --grid {pair})")
    values = [measured_points(r).get((*point, BUSBW)) for r in same]
    values = [v for v in values if v]
    if not values:
        held = sorted({f"{c} {s}" for r in same for c, s, m in measured_points(r) if m == BUSBW})
        raise CannotJudge(f"{where}: its {pair} figures are at {', '.join(held[:6])}, and the probe measures {point[0]} "
                          f"{point[1]} bytes; record it with the same probe.bench")
    floors = baseline_expectations(results, tolerance_pct, f"baseline {os.path.basename(os.path.abspath(run_dir))}")
    return PairBaseline(run_dir, statistics.median(values), tolerance_pct, point), floors


def against_baseline(result: HostBisectResult, baseline: PairBaseline) -> HostBisectResult:
    """The median of the pairs judged fine held against the baseline's: below it less the tolerance, every pair is
    slower than recorded; with no host named, nothing explains that (inconclusive)."""
    figures = [e.figure for e in result.evidence if len(e.hosts) == 2 and e.figure is not None and e.verdict == OK]
    if not figures:
        return dataclasses.replace(result, complete=False, note="; ".join(filter(None, [
            result.note, "no pair measured a bandwidth within its round: nothing to hold against the baseline"])))
    median = statistics.median(figures)
    line = (f"fine pairs' median {median:.3g} GB/s = {median / baseline.gbps:.2f}x the baseline's {baseline.gbps:.3g} GB/s "
            f"({baseline.point[0]} {baseline.point[1]} bytes)")
    if median < (1 - baseline.tolerance_pct / 100) * baseline.gbps:
        line += f", below it less {baseline.tolerance_pct:g}%: every pair is slower than when recorded"
        if not result.culprits:  # the named hosts are slow against the others; with none named, no host explains it
            line += ", which no host explains"
            return dataclasses.replace(result, complete=False, note="; ".join(filter(None, [result.note, line])))
    return dataclasses.replace(result, note="; ".join(filter(None, [result.note, line])))


def verdict_of(result: ProbeResult) -> str:
    if result.outcome == PASS:
        return OK
    if result.outcome == SLOW_OUTCOME:
        return SLOW
    if result.outcome in (RUN_UNRESOLVED, LAUNCH_ERROR):  # the check could not run (our own launch failed)
        return UNRESOLVED
    return FAILING


def run_host_bisect(inp: Any, hosts: list[str], ppn: int, setup: Any, run_dir: str, pins: Mapping[str, str], gpus: int,
                    on_run: Optional[Callable[[Evidence, ProbeResult], None]] = None,
                    lock_for: Optional[str] = None) -> HostBisectResult:
    """``lock_for``: the command line that holds the run directory's store (as sweep and env bisect do)."""
    from envmatrix.engine.session import open_session
    from envmatrix.engine.trial import plan_trial, run_at_once
    from envmatrix.launchers import configure_launcher
    from envmatrix.judgement.thresholds import judge

    if inp.launcher not in HOST_LAUNCHERS:
        raise ConfigError(f"bisect --hosts: launcher={inp.launcher} runs on this host only; allowed: launcher={', '.join(HOST_LAUNCHERS)}")
    sweep_id = f"hosts-{inp.name}-{time.strftime('%Y%m%dT%H%M%S')}"
    point = measured_point(inp.probe)
    with open_session(inp, run_dir, pins, gpus, sweep_id=sweep_id, lock_for=lock_for) as session:
        session.store.open_sweep(sweep_id, {"config": inp.config, "conf_file": str(inp.conf_file), "hosts": hosts, "ppn": ppn})
        base = session.under(judge=lambda result: judge(result, inp.expectations))

        def run_round(number: int, groups: list[tuple[str, ...]]) -> list[Evidence]:
            items = []
            for group in groups:
                grid = Grid(len(group), ppn)
                # The hosts are part of the run's identity: the same env on other hosts is another run.
                on_group = base.under(launcher=configure_launcher(inp.launcher, inp.launcher_opts, group, [grid], inp.backend),
                                      launcher_key=f"{inp.launcher_key}@{','.join(group)}")
                items.append((on_group, plan_trial(on_group, setup, grid), f"round{number}-{'_'.join(group)}"))
            out = []
            for group, (session_, run, label), trial in zip(groups, items, run_at_once(items)):
                figure = group_figure(trial.result, point)
                shown = f" {figure:.3g} GB/s" if figure is not None else ""
                evidence = Evidence(number, group, verdict_of(trial.result),
                                    f"round {number} {','.join(group)}: {trial.result.outcome}{shown}", figure)
                if on_run:
                    on_run(evidence, trial.result)
                out.append(evidence)
            return out

        return localise(hosts, run_round, seed=inp.seed, relative=point is not None)


def write_outputs(result: HostBisectResult, run_dir: str, slots: dict[str, Optional[int]]) -> tuple[str, str]:
    """(hostfile without the excluded hosts, JSON report) in the run directory."""
    hostfile = os.path.join(run_dir, "hosts_ok.txt")
    with open(hostfile, "w") as fh:
        fh.write(result.hostfile(slots))
    report = os.path.join(run_dir, "host_bisect.json")
    with open(report, "w") as fh:
        json.dump({
            "hosts": result.hosts, "culprits": [list(c) for c in result.culprits], "exclude": result.exclude,
            "rounds": result.rounds, "runs": result.runs, "complete": result.complete, "note": result.note,
            "verdicts": {h: {"status": v.status, "why": v.why, "evidence": [e.run for e in v.evidence]} for h, v in result.verdicts.items()},
            "evidence": [{"round": e.round, "hosts": list(e.hosts), "verdict": e.verdict, "run": e.run, "gbps": e.figure}
                         for e in result.evidence],
            "pairs": None if result.pairs is None else {
                "summary": result.pairs.summary(),
                "hosts": {h.host: {"pairs": h.pairs, "slow_pairs": h.slow_pairs, "median_ratio": h.median_ratio,
                                   "slow": h.slow, "certainty": h.certainty} for h in result.pairs.hosts},
                "pairs": [{"round": v.figure.round, "hosts": [v.figure.a, v.figure.b], "gbps": v.figure.value,
                           "reference": v.reference, "slow": v.slow} for v in result.pairs.pairs]},
        }, fh, indent=1)
    return hostfile, report
