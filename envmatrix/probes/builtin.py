"""The built-in probe: torch.distributed init + value-checked collectives per rank."""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

from envmatrix.errors import ConfigError
from envmatrix.execution.processes import ProcessOutcome
from envmatrix.planning.plan import ProbeSpec
from envmatrix.probes.base import Probe, from_process, register
from envmatrix.probes.rootcause import root_cause_line
from envmatrix.results import PASS, PEER_KILLED, TIMEOUT, RankResult

COLLECTIVES = ("allreduce", "allgather", "alltoall")


@register
class BuiltinProbe(Probe):
    name = "builtin"
    defaults = {"collectives": list(COLLECTIVES), "numel": 4096, "timeout_s": 120.0, "grace_s": 5.0}

    def validate(self, params: Mapping[str, Any], where: str) -> None:
        bad = [c for c in params["collectives"] if c not in COLLECTIVES]
        if bad or not params["collectives"]:
            raise ConfigError(f"{where}.collectives: {bad or '[]'} not allowed; allowed: a non-empty subset of {', '.join(COLLECTIVES)}")
        if int(params["numel"]) < 1:
            raise ConfigError(f"{where}.numel: {params['numel']!r} not allowed; allowed: an integer >= 1")

    def rank_argv(self, spec: ProbeSpec, python: str) -> tuple[str, ...]:
        return (python, "-m", "envmatrix.probes.rank_main")

    def rank_env(self, spec: ProbeSpec) -> dict[str, str]:
        return {"ENVMATRIX_PROBE": json.dumps(spec.params, sort_keys=True)}

    def interpret(self, rank: RankResult, process: ProcessOutcome, report: Optional[dict[str, Any]], log: str) -> RankResult:
        if report:
            rank.phase = report.get("phase")
            for key in ("env", "versions", "device", "timings", "checks"):
                if report.get(key) is not None:
                    setattr(rank, key, report[key])
        from_process(rank, process, log)
        verdict = (report or {}).get("outcome")
        if verdict and rank.outcome not in (TIMEOUT, PEER_KILLED) and not process.signal:
            rank.outcome = verdict
            rank.error = report.get("error")
            text = "\n".join(filter(None, [report.get("traceback"), log]))
            rank.root_cause_line = None if verdict == PASS else (root_cause_line(text) or rank.error)
            # The rank's own clock at the failure orders ranks better than process exit times.
            rank.ended_at = report.get("failed_at") or rank.ended_at
        elif process.exit_code == 0 and not verdict:
            rank.outcome, rank.error = "exit_error", "exited 0 without reporting a result"
        return rank
