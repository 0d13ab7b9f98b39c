"""``envmatrix bisect --hosts``: run host bisect's rounds as real launches (one per host group, a round at once)."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping, Optional

from envmatrix.bisect.hosts import FAILING, OK, SLOW, UNRESOLVED, Evidence, HostBisectResult, localise
from envmatrix.errors import ConfigError
from envmatrix.planning.grid import Grid
from envmatrix.planning.plan import plan_runs
from envmatrix.results import LAUNCH_ERROR, PASS, UNRESOLVED as RUN_UNRESOLVED, ProbeResult

SLOW_OUTCOME = "slow"  # a measured cell below its expected threshold (config expect: / --baseline)
HOST_LAUNCHERS = ("mpirun", "mpiexec", "srun")


def verdict_of(result: ProbeResult) -> str:
    if result.outcome == PASS:
        return OK
    if result.outcome == SLOW_OUTCOME:
        return SLOW
    if result.outcome in (RUN_UNRESOLVED, LAUNCH_ERROR):  # the check could not run (our own launch failed)
        return UNRESOLVED
    return FAILING


def run_host_bisect(inp: Any, hosts: list[str], ppn: int, setup: Any, run_dir: str, store: Any, inherited_env: Mapping[str, str],
                    pins: Mapping[str, str], gpus: int, host: dict, on_run: Optional[Callable[[Evidence, ProbeResult], None]] = None
                    ) -> HostBisectResult:
    from envmatrix.execution.runner import execute
    from envmatrix.launchers import configure_launcher
    from envmatrix.probes import get_probe
    from envmatrix.app.sweep import run_workdir

    if inp.launcher not in HOST_LAUNCHERS:
        raise ConfigError(f"bisect --hosts: launcher={inp.launcher} runs on this host only; allowed: launcher={', '.join(HOST_LAUNCHERS)}")
    probe = get_probe(inp.probe.name)
    sweep_id = f"hosts-{inp.name}-{time.strftime('%Y%m%dT%H%M%S')}"
    store.open_sweep(sweep_id, {"config": inp.config, "conf_file": str(inp.conf_file), "hosts": hosts, "ppn": ppn})

    def one(number: int, group: tuple[str, ...]) -> tuple[Evidence, ProbeResult]:
        grid = Grid(len(group), ppn)
        # The hosts are part of the run's identity: the same env on other hosts is another run.
        (run,) = plan_runs([setup], [grid], inp.probe, inp.backend, f"{inp.launcher_key}@{','.join(group)}")
        launcher = configure_launcher(inp.launcher, inp.launcher_opts, group, [grid], inp.backend)
        workdir = run_workdir(run_dir, run, f"round{number}-{'_'.join(group)[:80]}")
        result = execute(run, launcher, probe, workdir, inherited_env, pins, gpus)
        return Evidence(number, group, verdict_of(result), os.path.relpath(workdir, run_dir)), result

    def run_round(number: int, groups: list[tuple[str, ...]]) -> list[Evidence]:
        with ThreadPoolExecutor(len(groups)) as ex:  # disjoint hosts: the whole round at the same time
            done = list(ex.map(lambda g: one(number, g), groups))
        out = []
        for evidence, result in done:  # only this (the driver's) thread touches the store
            result.sweep_id, result.host = sweep_id, host
            result.root_cause = {**(result.root_cause or {}), "hosts": list(evidence.hosts)}
            store.put(result)
            if on_run:
                on_run(evidence, result)
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
