"""Any command as a probe, judged like git bisect run: 0 pass, 125 unresolved, else fail."""

from __future__ import annotations

import os
import shutil
from typing import Any, Optional, Sequence

from envmatrix import values
from envmatrix.errors import ConfigError
from envmatrix.boundary import ProcessOutcome
from envmatrix.planning.plan import ProbeSpec
from envmatrix.probes.base import Probe, from_process, register
from envmatrix.probes.builtin import check_nccl_debug, nccl_debug_env
from envmatrix.probes.transport_policy import forbidden_transports
from envmatrix.parsers.nccl_tests import NcclTestsReport, looks_like_nccl_tests, parse_stdout
from envmatrix.results import COLLECTIVE_ERROR, EXIT_ERROR, PASS, UNRESOLVED, WRONG_RESULT, RankResult

SKIP_EXIT = 125


def command_argv(command: Any, key: str = "probe.command") -> tuple[str, ...]:
    return tuple(values.argv(key, command))


@register
class CommandProbe(Probe):
    name = "command"
    defaults = {
        "command": None,
        "timeout_s": 120.0,
        "grace_s": 5.0,
        "nccl_debug": None,
        "nccl_debug_subsys": "INIT,NET",
        "forbid_transport": [],
    }

    def rank_env(self, spec: ProbeSpec) -> dict[str, str]:
        return nccl_debug_env(spec.params)

    def normalize(self, params: dict[str, Any], where: str, backend: str) -> dict[str, Any]:
        if not params.get("command") or not command_argv(params["command"]):
            raise ConfigError(f"{where}.command: missing; give the command each rank runs, e.g. probe.command='all_reduce_perf -b 8 -e 1M'")
        argv = command_argv(params["command"])
        if os.sep in argv[0] and not os.path.isabs(argv[0]):
            # ranks start in the run's directory: the path is relative to where envmatrix was called
            params["command"] = [os.path.abspath(argv[0]), *argv[1:]]
        check_nccl_debug(params, where)
        params["forbid_transport"] = forbidden_transports(params.get("forbid_transport"), f"{where}.forbid_transport")
        if params["forbid_transport"] and not params.get("nccl_debug"):
            params["nccl_debug"] = "INFO"
        return super().normalize(params, where, backend)

    def rank_argv(self, spec: ProbeSpec, python: str) -> tuple[str, ...]:
        return command_argv(spec.params["command"])

    def missing_here(self, spec: ProbeSpec, python: str) -> Optional[str]:
        program = command_argv(spec.params["command"])[0]
        if os.sep in program:
            if os.path.isfile(program) and os.access(program, os.X_OK):
                return None
            return f"probe.command: {program!r} is not an executable file; allowed: a program on PATH or a path to one"
        if shutil.which(program) is None:
            return f"probe.command: {program!r} not found on PATH; allowed: a program on PATH or a path to one"
        return None

    def interpret(self, rank: RankResult, process: ProcessOutcome, report: Optional[dict[str, Any]], log: str) -> RankResult:
        from_process(rank, process, log)
        if process.exit_code == SKIP_EXIT and not process.killed_by:
            rank.outcome, rank.error = UNRESOLVED, f"exit code {SKIP_EXIT} (cannot test)"
        elif looks_like_nccl_tests(log):
            judge_nccl_tests(rank, parse_stdout(log))
        return rank

    def metrics(self, ranks: Sequence[RankResult], world: int) -> list[dict[str, Any]]:
        """nccl-tests' table is already reduced over ranks: take the lowest rank that printed one."""
        return next((list(r.bench) for r in sorted(ranks, key=lambda r: r.rank) if r.bench), [])


def judge_nccl_tests(rank: RankResult, report: NcclTestsReport) -> None:
    """Self-checking like nccl-tests: #wrong > 0 or a FAILED footer is a wrong_result."""
    rank.bench = report.metrics(report.collective or "unknown")
    if report.errors and rank.outcome != PASS:
        rank.outcome = COLLECTIVE_ERROR if rank.outcome == EXIT_ERROR else rank.outcome
        rank.root_cause_line = report.last_nccl_error or report.errors[0]
        rank.error = report.errors[0]
    elif rank.outcome == PASS and (report.wrong_total or report.out_of_bounds_ok is False):
        bad = [r for r in report.rows if r.wrong]
        where = f" (first at {bad[0].size_bytes} B, {'in' if bad[0].in_place else 'out-of'}-place)" if bad else ""
        rank.outcome = WRONG_RESULT
        rank.error = rank.root_cause_line = f"nccl-tests: {report.wrong_total} wrong elements{where}, out of bounds values {report.out_of_bounds}"
