"""Execute one planned run: launcher plan -> processes -> per-rank results -> verdict.

:func:`execute` is the sequence of named steps (start, collect ranks, judge them, place them, diagnose a hang,
check env delivery and transports); each step asks the launcher only through the hooks ``launchers.base.Launcher``
declares.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from envmatrix.boundary import ProcessOutcome, echoed_env, env_report_path, rank_report_path
from envmatrix.env.atoms import Setup
from envmatrix.env.merge import materialize
from envmatrix.execution.hang import StackRequest, diagnose, ras_address
from envmatrix.execution.processes import run_group
from envmatrix.parsers.nccl_log import merge, parse_nccl_log, transport_label
from envmatrix.launchers.base import HostSeat, LaunchContext, Launcher, LaunchPlan
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
                   gpus: int, python: str, port: int, host_seats: tuple[HostSeat, ...] = ()) -> LaunchContext:
    """What the launcher builds from; --dry-run renders the same plan without starting it."""
    return LaunchContext(workdir=workdir, inherited_env=inherited_env, pins=pins, rank_argv=probe.rank_argv(run.probe, python),
                         probe_env=probe.rank_env(run.probe), port=port, gpus=gpus, host_seats=host_seats)


@dataclass
class Launched:
    """A started run once its processes ended: the plan, how each process ended (as its launcher means it)."""

    plan: LaunchPlan
    outcomes: list[ProcessOutcome]
    stacks: StackRequest  # the hang diagnosis' request; fired when the run timed out and stacks were asked for
    started: float
    finished: float


@dataclass
class Collected:
    """Per rank, in slot order: its result as the probe reads it, and its log; which ranks wrote a report."""

    ranks: list[RankResult]
    logs: list[str]
    reported: set[int]


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
    host_seats: tuple[HostSeat, ...] = (),
) -> ProbeResult:
    """Start ``run``'s processes, read every rank's result, and judge the run: the steps below, in order."""
    os.makedirs(workdir, exist_ok=True)
    for attempt in range(1, RENDEZVOUS_TRIES + 1):
        port = free_port()
        plan = launcher.build(run, launch_context(run, probe, workdir, inherited_env, pins, gpus, python, port, host_seats))
        launched = start(run, launcher, probe, plan, workdir, pool)
        collected = collect_ranks(launcher, probe, launched, workdir)
        if attempt == RENDEZVOUS_TRIES or not rendezvous_port_taken(collected, port):
            break
        set_aside(workdir, f"port_{port}_taken")
    outcome, cause = judge_ranks(launcher, launched, collected)
    shim = place_ranks(collected, plan, workdir)
    if cause and not cause.get("host"):  # the shim's record names the host of a rank the launcher did not
        cause["host"] = next((r.hostname for r in collected.ranks if r.rank == cause.get("rank")), None)
    hang = diagnose_hang(launched.stacks, collected)
    if outcome == TIMEOUT and hang.get("line"):
        cause = {**cause, "line": hang["line"], **hang.get("culprit", {})}
    problem, first = delivery_problem(
        plan.intended_env, checked_names(run.setup.variables, pins, plan.intended_env), shim,
        {r.rank: r.env for r in collected.ranks}, require_reports=launcher.reports_env and outcome == PASS,
    )
    if problem:
        outcome, cause = ENV_MISMATCH, failure_cause(first, ENV_MISMATCH, problem)
    if launcher.uses_warm_pool and plan.process_of_rank is None:
        # Each process is a rank this host started with its env (execve): a rank that echoed none (a command
        # probe) saw exactly that; recorded after the delivery check, which it must not pass for free.
        for rank, env in zip(collected.ranks, plan.intended_env):
            rank.env = rank.env or echoed_env(env)
    nccl = {**nccl_facts(collected.logs), **nccl_dumps(workdir)}
    violation = transport_violation(nccl, run.probe.params.get("forbid_transport") or [])
    if violation and outcome == PASS:
        outcome, cause = WRONG_TRANSPORT, failure_cause(0, WRONG_TRANSPORT, violation)
    return probe_result(run, probe, launched, collected, outcome, cause, nccl, hang)


# free_port() releases the port it found before rank 0's TCPStore binds it; another process (a parallel run, a
# test worker) can take it in between, and rank 0 then fails with EADDRINUSE: the rendezvous's fault, not the
# setup's. Such a run is started again on a new port, its first attempt's files kept beside the run's.
RENDEZVOUS_TRIES = 3


def rendezvous_port_taken(collected: Collected, port: int) -> bool:
    texts = [f"{r.error or ''} {r.root_cause_line or ''}" for r in collected.ranks] + list(collected.logs)
    return any("EADDRINUSE" in t and f"port: {port}," in t for t in texts)


def set_aside(workdir: str, name: str) -> None:
    """Move an attempt's files into WORKDIR/NAME so the next attempt's reports are read alone."""
    aside = os.path.join(workdir, name)
    os.makedirs(aside, exist_ok=True)
    for entry in os.listdir(workdir):
        path = os.path.join(workdir, entry)
        if path != aside and not entry.startswith("port_"):
            os.replace(path, os.path.join(aside, entry))


def start(run: Run, launcher: Launcher, probe: Probe, plan: LaunchPlan, workdir: str, pool: Any) -> Launched:
    """Run the plan's processes to their end (or the probe's timeout, asking for stacks first when the probe
    answers that request); each outcome as the launcher means it."""
    params = run.probe.params
    group = pool.run_group if pool is not None else run_group  # a WarmPool (execution/pool.py)
    grace_s = float(params.get("grace_s", 5.0))
    # NCCL's RAS listens on loopback by default: only asked when rank 0 runs on this host.
    local = plan.intended_env and plan.intended_env[0].get("MASTER_ADDR") in ("127.0.0.1", "localhost")
    stacks = StackRequest(workdir, [s.rank for s in plan.slots], wait_s=min(5.0, grace_s),
                          ras_address=ras_address(plan.intended_env[0]) if run.backend == "nccl" and local else None,
                          forwards=launcher.forwards_stack_signal)
    started = time.time()
    outcomes = group(plan.processes, timeout_s=float(params["timeout_s"]), grace_s=grace_s,
                     on_timeout=stacks if probe.answers_stack_request else None)
    finished = time.time()
    return Launched(plan, [launcher.map_outcome(o) for o in outcomes], stacks, started, finished)


def collect_ranks(launcher: Launcher, probe: Probe, launched: Launched, workdir: str) -> Collected:
    """Each rank's result: its own report and log, read by the probe, with how its process ended (its
    launcher's account first, when one process hosts many ranks)."""
    plan, outcomes = launched.plan, launched.outcomes
    accounts = launcher_accounts(launcher, plan, outcomes)
    collected = Collected([], [], set())
    for slot in plan.slots:
        paths = plan.logs_of(slot.rank)
        rank = RankResult(rank=slot.rank, node=slot.node, local_rank=slot.local_rank, log_path=paths[0])
        report = _read_json(rank_report_path(workdir, slot.rank))
        if report is not None:
            collected.reported.add(slot.rank)
        log = "".join(_read_text(p) for p in paths)
        collected.logs.append(log)
        account = accounts[plan.process_index(slot.rank)]
        has_verdict = bool((report or {}).get("outcome"))
        process = rank_outcome(outcomes[plan.process_index(slot.rank)], slot.rank, account, has_verdict)
        collected.ranks.append(probe.interpret(rank, process, report, log))
        if slot.rank in account and not has_verdict:
            blame_from_launcher(collected.ranks[-1], account[slot.rank][1], _read_text(paths[0]) if len(paths) > 1 else "")
    return collected


def judge_ranks(launcher: Launcher, launched: Launched, collected: Collected) -> tuple[str, dict]:
    """(outcome, root cause) from the ranks' results; the launcher's own failure, when it reports one, wins."""
    outcome, cause = verdict(collected.ranks)
    if outcome != PASS:
        outcome, cause = launcher_level(launcher, launched.plan, launched.outcomes, collected.ranks,
                                        collected.reported) or (outcome, cause)
    return outcome, cause


def place_ranks(collected: Collected, plan: LaunchPlan, workdir: str) -> dict[int, Optional[dict[str, Any]]]:
    """What each rank saw and where it ran: the shim's rank{R}.env.json (returned, per rank), else the probe's
    echo; the host the launcher was told; the NIC NCCL chose."""
    shim = {s.rank: _read_json(env_report_path(workdir, s.rank)) for s in plan.slots}
    slot_host = {s.rank: s.host for s in plan.slots}
    for rank, log in zip(collected.ranks, collected.logs):
        rank.env = rank.env or dict((shim.get(rank.rank) or {}).get("env") or {})
        rank.hostname = rank.hostname or (shim.get(rank.rank) or {}).get("host") or slot_host.get(rank.rank)
        nic_from_nccl_log(rank, log)
    return shim


def diagnose_hang(stacks: StackRequest, collected: Collected) -> dict[str, Any]:
    """Where a timed-out run's ranks were stuck (their stacks, NCCL's RAS, their logs); {} when none was asked."""
    if not stacks.fired:
        return {}
    hang = diagnose(collected.ranks, stacks.stacks(), {r.rank: log for r, log in zip(collected.ranks, collected.logs)},
                    stacks.ras)
    hang["signalled_directly"] = stacks.direct  # the launcher did not pass the request on to these ranks
    return hang


def failure_cause(rank: Optional[int], outcome: str, line: str) -> dict[str, Any]:
    """The root cause of a run the driver's own checks failed (env delivery, transport)."""
    return {"rank": rank, "outcome": outcome, "line": line, "error": line}


def probe_result(run: Run, probe: Probe, launched: Launched, collected: Collected, outcome: str, cause: dict,
                 nccl: dict[str, Any], hang: dict[str, Any]) -> ProbeResult:
    ranks = collected.ranks
    versions = next((r.versions for r in ranks if r.versions), {})
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
        started_at=launched.started,
        finished_at=launched.finished,
        versions={k: v for k, v in versions.items() if k != "libraries"},
        intended_env=intended_setup_env(run.setup),
        metrics=probe.metrics(ranks, run.grid.world),
        nccl=nccl,
        argv=[list(proc.argv) for proc in launched.plan.processes],
        hang=hang,
        placement=dict(launched.plan.placement),
    )


def launcher_accounts(launcher: Launcher, plan: LaunchPlan, outcomes: list[ProcessOutcome]) -> list[dict]:
    """Per launched process: the launcher's own account of its failed ranks ({} when it hosts one rank or passed)."""
    hosts_many = plan.process_of_rank is not None
    return [account_of(launcher.rank_exits(_read_text(spec.log_path))) if hosts_many and (done.exit_code or done.signal) else {}
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


def launcher_level(launcher: Launcher, plan: LaunchPlan, outcomes: list[ProcessOutcome], ranks: list[RankResult],
                   reported: set[int]) -> Optional[tuple[str, dict]]:
    """(launcher_error, cause naming the host) when the launcher itself says it could not start or keep the ranks.

    Only its own failed processes' output is read; ranks with no structured report take the class,
    so a grid cell says launcher_error instead of exit_error with a banner line as its cause.
    """
    for spec, done in zip(plan.processes, outcomes):
        if done.exit_code in (0, None) and not done.signal:
            continue
        failure = launcher.launcher_failure(_read_text(spec.log_path))
        if failure is None:
            continue
        line = failure.line()
        for rank in ranks:
            if rank.rank not in reported and rank.outcome != PASS:
                rank.outcome, rank.error, rank.root_cause_line = LAUNCHER_ERROR, line, line
        first = min((r.rank for r in ranks if r.outcome == LAUNCHER_ERROR), default=0)
        return LAUNCHER_ERROR, {"rank": first, "outcome": LAUNCHER_ERROR, "line": line, "error": line, "host": failure.host}
    return None


def nccl_dumps(workdir: str) -> dict[str, str]:
    """probe.nccl_dump_topology: the files NCCL wrote into the run dir (rank 0 only, NCCL_*_DUMP_FILE_RANK)."""
    dumps = {key: os.path.join(workdir, name) for key, name in (("topo_dump", "nccl_topo.xml"), ("graph_dump", "nccl_graph.xml"))}
    return {key: path for key, path in dumps.items() if os.path.isfile(path)}


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
