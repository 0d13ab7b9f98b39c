"""``envmatrix bisect --hosts``' lifecycle: host bisect's rounds as real launches (one per host group, a round at
once), then a hostfile without the culprits and a JSON report."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from envmatrix.bisect.hosts import FAILING, OK, SLOW, UNRESOLVED, Evidence, HostBisectResult, localise
from envmatrix.errors import EXIT_FAILURES, EXIT_INCONCLUSIVE, EXIT_OK, ConfigError
from envmatrix.planning.grid import Grid
from envmatrix.results import LAUNCH_ERROR, PASS, UNRESOLVED as RUN_UNRESOLVED, ProbeResult

SLOW_OUTCOME = "slow"  # a measured cell below its expect:/--baseline floor (judgement.thresholds.judge)
HOST_LAUNCHERS = ("mpirun", "mpiexec", "srun")


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
    result = run_host_bisect(inp, hosts, ppn, setup, run_dir, pins, len(gpus), events.host_round)
    hostfile, report = write_outputs(result, run_dir, slots)
    code = EXIT_INCONCLUSIVE if not result.complete else EXIT_FAILURES if result.culprits else EXIT_OK
    return HostBisectOutcome(hosts, result, hostfile, report, code)


def read_hosts(spec: str) -> list[tuple[str, Any]]:
    """(host, slots or None) of a host file, or of SLURM_JOB_NODELIST for ``slurm``."""
    from envmatrix.bisect.hosts import parse_host_list
    from envmatrix.config.compose import read_utf8

    if spec == "slurm":
        from envmatrix.launchers.allocation import expand_nodelist

        nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
        if not nodelist:
            raise ConfigError("--hosts slurm: SLURM_JOB_NODELIST is not set; run inside salloc/sbatch or pass a host file")
        return [(h, None) for h in expand_nodelist(nodelist)]
    return parse_host_list(read_utf8(Path(spec), f"--hosts {spec}"), spec)


def verdict_of(result: ProbeResult) -> str:
    if result.outcome == PASS:
        return OK
    if result.outcome == SLOW_OUTCOME:
        return SLOW
    if result.outcome in (RUN_UNRESOLVED, LAUNCH_ERROR):  # the check could not run (our own launch failed)
        return UNRESOLVED
    return FAILING


def run_host_bisect(inp: Any, hosts: list[str], ppn: int, setup: Any, run_dir: str, pins: Mapping[str, str], gpus: int,
                    on_run: Optional[Callable[[Evidence, ProbeResult], None]] = None) -> HostBisectResult:
    from envmatrix.engine.session import open_session
    from envmatrix.engine.trial import plan_trial, run_at_once
    from envmatrix.launchers import configure_launcher
    from envmatrix.judgement.thresholds import judge

    if inp.launcher not in HOST_LAUNCHERS:
        raise ConfigError(f"bisect --hosts: launcher={inp.launcher} runs on this host only; allowed: launcher={', '.join(HOST_LAUNCHERS)}")
    sweep_id = f"hosts-{inp.name}-{time.strftime('%Y%m%dT%H%M%S')}"
    with open_session(inp, run_dir, pins, gpus, sweep_id=sweep_id) as session:
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
                evidence = Evidence(number, group, verdict_of(trial.result), f"round {number} {','.join(group)}: {trial.result.outcome}")
                if on_run:
                    on_run(evidence, trial.result)
                out.append(evidence)
            return out

        return localise(hosts, run_round, seed=inp.seed)


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
            "evidence": [{"round": e.round, "hosts": list(e.hosts), "verdict": e.verdict, "run": e.run} for e in result.evidence],
        }, fh, indent=1)
    return hostfile, report
