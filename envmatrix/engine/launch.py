"""Execute one planned run: launcher plan -> processes -> per-rank results -> verdict."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any, Mapping, Optional

from envmatrix.boundary import env_report_path, rank_report_path
from envmatrix.env.atoms import Setup
from envmatrix.env.merge import materialize
from envmatrix.execution.hang import StackRequest, diagnose, ras_address
from envmatrix.execution.processes import run_group
from envmatrix.parsers.nccl_log import merge, parse_nccl_log, transport_label
from envmatrix.launchers.base import LaunchContext, Launcher
from envmatrix.launchers.rank_exits import RankExit, account_of, rank_outcome
from envmatrix.planning.plan import Run
from envmatrix.probes.base import Probe
from envmatrix.probes.delivery import checked_names, delivery_problem
from envmatrix.probes.outcome import verdict
from envmatrix.probes.rootcause import root_cause_line
from envmatrix.probes.transport_policy import WRONG_TRANSPORT, transport_violation
from envmatrix.results import ENV_MISMATCH, LAUNCHER_ERROR, PASS, PEER_KILLED, TIMEOUT, ProbeResult, RankResult


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _read_json(path: str) -> Optional[dict[str, Any]]:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _read_text(path: str) -> str:
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def intended_setup_env(setup: Setup) -> dict[str, str]:
    """The setup's own variables as a rank should see them (inherited paths shown as $VAR)."""
    base = {var: f"${var}" for var in setup.variables}
    return {k: v for k, v in materialize(base, setup.atoms).items() if k in setup.variables}


def launch_context(run: Run, probe: Probe, workdir: str, inherited_env: Mapping[str, str], pins: Mapping[str, str],
                   gpus: int, python: str, port: int) -> LaunchContext:
    """What the launcher builds from; --dry-run renders the same plan without starting it."""
    return LaunchContext(workdir=workdir, inherited_env=inherited_env, pins=pins, rank_argv=probe.rank_argv(run.probe, python),
                         probe_env=probe.rank_env(run.probe), port=port, gpus=gpus)


def execute(
    run: Run,
    launcher: Launcher,
    probe: Probe,
    workdir: str,
    inherited_env: Mapping[str, str],
    pins: Mapping[str, str],
    gpus: int,
    python: str = sys.executable,
    pool: Any = None,
) -> ProbeResult:
    os.makedirs(workdir, exist_ok=True)
    plan = launcher.build(run, launch_context(run, probe, workdir, inherited_env, pins, gpus, python, free_port()))
    params = run.probe.params
    started = time.time()
    group = pool.run_group if pool is not None else run_group  # a WarmPool (execution/pool.py)
    grace_s = float(params.get("grace_s", 5.0))
    # NCCL's RAS listens on loopback by default: only asked when rank 0 runs on this host.
    local = plan.intended_env and plan.intended_env[0].get("MASTER_ADDR") in ("127.0.0.1", "localhost")
    stacks = StackRequest(workdir, [s.rank for s in plan.slots], wait_s=min(5.0, grace_s),
                          ras_address=ras_address(plan.intended_env[0]) if run.backend == "nccl" and local else None,
                          forwards=getattr(launcher, "forwards_stack_signal", True))
    outcomes = group(plan.processes, timeout_s=float(params["timeout_s"]), grace_s=grace_s,
                     on_timeout=stacks if probe.answers_stack_request else None)
    finished = time.time()
    outcomes = [getattr(launcher, "map_outcome", lambda o: o)(o) for o in outcomes]  # e.g. mpirun's 128+N
    accounts = launcher_accounts(launcher, plan, outcomes)
    ranks, logs, reported = [], [], set()
    for slot in plan.slots:
        paths = plan.logs_of(slot.rank)
        rank = RankResult(rank=slot.rank, node=slot.node, local_rank=slot.local_rank, log_path=paths[0])
        report = _read_json(rank_report_path(workdir, slot.rank))
        if report is not None:
            reported.add(slot.rank)
        log = "".join(_read_text(p) for p in paths)
        logs.append(log)
        account = accounts[plan.process_index(slot.rank)]
        has_verdict = bool((report or {}).get("outcome"))
        process = rank_outcome(outcomes[plan.process_index(slot.rank)], slot.rank, account, has_verdict)
        ranks.append(probe.interpret(rank, process, report, log))
        if slot.rank in account and not has_verdict:
            blame_from_launcher(ranks[-1], account[slot.rank][1], _read_text(paths[0]) if len(paths) > 1 else "")
    outcome, cause = verdict(ranks)
    if outcome != PASS:
        outcome, cause = launcher_level(launcher, plan, outcomes, ranks, reported) or (outcome, cause)
    # Env delivery proof: what each rank saw (shim's rank{R}.env.json, else the probe's echo) vs the plan.
    shim = {s.rank: _read_json(env_report_path(workdir, s.rank)) for s in plan.slots}
    slot_host = {s.rank: s.host for s in plan.slots}
    for rank, log in zip(ranks, logs):
        rank.env = rank.env or dict((shim.get(rank.rank) or {}).get("env") or {})
        rank.hostname = rank.hostname or (shim.get(rank.rank) or {}).get("host") or slot_host.get(rank.rank)
        nic_from_nccl_log(rank, log)
    if cause and not cause.get("host"):  # the shim's record names the host of a rank the launcher did not
        cause["host"] = next((r.hostname for r in ranks if r.rank == cause.get("rank")), None)
    hang: dict[str, Any] = {}
    if stacks.fired:
        hang = diagnose(ranks, stacks.stacks(), {r.rank: log for r, log in zip(ranks, logs)}, stacks.ras)
        hang["signalled_directly"] = stacks.direct  # the launcher did not pass the request on to these ranks
        if outcome == TIMEOUT and hang.get("line"):
            cause = {**cause, "line": hang["line"]}
    problem, first = delivery_problem(
        plan.intended_env, checked_names(run.setup.variables, pins, plan.intended_env), shim,
        {r.rank: r.env for r in ranks}, require_reports=getattr(launcher, "reports_env", False) and outcome == PASS,
    )
    if problem:
        outcome, cause = ENV_MISMATCH, {"rank": first, "outcome": ENV_MISMATCH, "line": problem, "error": problem}
    nccl = nccl_facts(logs)
    # probe.nccl_dump_topology: NCCL wrote these into the run dir (rank 0 only, NCCL_*_DUMP_FILE_RANK)
    dumps = {key: os.path.join(workdir, name) for key, name in (("topo_dump", "nccl_topo.xml"), ("graph_dump", "nccl_graph.xml"))}
    nccl.update({key: path for key, path in dumps.items() if os.path.isfile(path)})
    violation = transport_violation(nccl, params.get("forbid_transport") or [])
    if violation and outcome == PASS:
        outcome, cause = WRONG_TRANSPORT, {"rank": 0, "outcome": WRONG_TRANSPORT, "line": violation, "error": violation}
    versions = next((r.versions for r in ranks if r.versions), {})
    metrics = probe.metrics(ranks, run.grid.world)
    return ProbeResult(
        run_key=run.key,
        setup=run.setup.to_json(),
        grid=run.grid.label,
        probe=run.probe.to_json(),
        backend=run.backend,
        launcher=run.launcher,
        outcome=outcome,
        root_cause=cause,
        ranks=ranks,
        started_at=started,
        finished_at=finished,
        versions={k: v for k, v in versions.items() if k != "libraries"},
        intended_env=intended_setup_env(run.setup),
        metrics=metrics,
        nccl=nccl,
        argv=[list(proc.argv) for proc in plan.processes],
        hang=hang,
    )


def launcher_accounts(launcher: Launcher, plan: Any, outcomes: list) -> list[dict]:
    """Per launched process: the launcher's own account of its failed ranks ({} when it hosts one rank or passed)."""
    name = getattr(launcher, "name", "")
    hosts_many = plan.process_of_rank is not None
    return [account_of(name, _read_text(spec.log_path)) if hosts_many and (done.exit_code or done.signal) else {}
            for spec, done in zip(plan.processes, outcomes)]


def blame_from_launcher(rank: RankResult, named: RankExit, own_log: str) -> None:
    """A rank that left no verdict: the launcher's words name it, its host and how it ended; its own log's
    telling line (an NCCL WARN, an exception) still explains it better than the launcher can."""
    rank.hostname = rank.hostname or named.host
    if rank.outcome in (PASS, PEER_KILLED, TIMEOUT):
        return
    rank.error = named.line()
    rank.root_cause_line = (root_cause_line(own_log) if own_log.strip() else None) or named.line()


def nic_from_nccl_log(rank: RankResult, log: str) -> None:
    """NCCL's own choice (``NET/Socket : Using [0]eth0:...``) beats the rendezvous interface the rank saw."""
    if "NCCL " not in log:
        return
    summary = parse_nccl_log(log)
    devices = summary.net_devices.get(summary.network or "", [])
    if devices:
        rank.nic, rank.nic_source = ",".join(devices), f"NET/{summary.network}"


def launcher_level(launcher: Launcher, plan: Any, outcomes: list, ranks: list[RankResult],
                   reported: set[int]) -> Optional[tuple[str, dict]]:
    """(launcher_error, cause naming the host) when the launcher itself says it could not start or keep the ranks.

    Only its own failed processes' output is read; ranks with no structured report take the class,
    so a grid cell says launcher_error instead of exit_error with a banner line as its cause.
    """
    from envmatrix.launchers.failures import launcher_failure

    for spec, done in zip(plan.processes, outcomes):
        if done.exit_code in (0, None) and not done.signal:
            continue
        failure = launcher_failure(getattr(launcher, "name", ""), _read_text(spec.log_path))
        if failure is None:
            continue
        line = failure.line()
        for rank in ranks:
            if rank.rank not in reported and rank.outcome != PASS:
                rank.outcome, rank.error, rank.root_cause_line = LAUNCHER_ERROR, line, line
        first = min((r.rank for r in ranks if r.outcome == LAUNCHER_ERROR), default=0)
        return LAUNCHER_ERROR, {"rank": first, "outcome": LAUNCHER_ERROR, "line": line, "error": line, "host": failure.host}
    return None


def nccl_facts(logs: list[str]) -> dict[str, Any]:
    """What the ranks' NCCL logs say (transport per peer, plugin, warnings), merged over ranks."""
    if not any("NCCL " in log for log in logs):
        return {}
    summary = merge([parse_nccl_log(log) for log in logs])
    facts = summary.as_dict()
    for bulky in ("peers", "comms", "tuning"):  # "algorithms" keeps what the tuning lines say, counted
        facts.pop(bulky, None)
    facts["transport"] = transport_label(summary)
    return facts
