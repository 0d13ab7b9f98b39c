"""Any command as a probe, judged like git bisect run: 0 pass, 125 unresolved, else fail."""

from __future__ import annotations

import shlex
from typing import Any, Mapping, Optional

from envmatrix.errors import ConfigError
from envmatrix.execution.processes import ProcessOutcome
from envmatrix.planning.plan import ProbeSpec
from envmatrix.probes.base import Probe, from_process, register
from envmatrix.results import UNRESOLVED, RankResult

SKIP_EXIT = 125


def command_argv(command: Any) -> tuple[str, ...]:
    return tuple(shlex.split(command)) if isinstance(command, str) else tuple(str(c) for c in command)


@register
class CommandProbe(Probe):
    name = "command"
    defaults = {"command": None, "timeout_s": 120.0, "grace_s": 5.0}

    def normalize(self, params: dict[str, Any], where: str, backend: str) -> dict[str, Any]:
        if not params.get("command") or not command_argv(params["command"]):
            raise ConfigError(f"{where}.command: missing; give the command each rank runs, e.g. probe.command='all_reduce_perf -b 8 -e 1M'")
        return super().normalize(params, where, backend)

    def rank_argv(self, spec: ProbeSpec, python: str) -> tuple[str, ...]:
        return command_argv(spec.params["command"])

    def interpret(self, rank: RankResult, process: ProcessOutcome, report: Optional[dict[str, Any]], log: str) -> RankResult:
        from_process(rank, process, log)
        if process.exit_code == SKIP_EXIT and not process.killed_by:
            rank.outcome, rank.error = UNRESOLVED, f"exit code {SKIP_EXIT} (cannot test)"
        return rank
