"""``envmatrix bisect --hosts``: host bisect's rounds as real launches (one per host group, a round at once)."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Mapping, Optional

from envmatrix.bisect.hosts import FAILING, OK, SLOW, UNRESOLVED, Evidence, HostBisectResult, localise
from envmatrix.errors import ConfigError
from envmatrix.planning.grid import Grid
from envmatrix.results import LAUNCH_ERROR, PASS, UNRESOLVED as RUN_UNRESOLVED, ProbeResult

SLOW_OUTCOME = "slow"  # a measured cell below its expect:/--baseline floor (judgement.thresholds.judge)
HOST_LAUNCHERS = ("mpirun", "mpiexec", "srun")


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
