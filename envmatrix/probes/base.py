"""Probe ABC + registry: what each rank runs and how its traces become a RankResult."""

from __future__ import annotations

import abc
import json
import math
from typing import Any, Mapping, Optional, Sequence

from envmatrix.bench.aggregate import aggregate_rows
from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.boundary import ProcessOutcome
from envmatrix.planning.plan import ProbeSpec
from envmatrix.probes.rootcause import root_cause_line, tail
from envmatrix.registry import Registry
from envmatrix.results import CRASH, EXIT_ERROR, LAUNCH_ERROR, PASS, TIMEOUT, PEER_KILLED, RankResult


class Probe(abc.ABC):
    name: str = ""
    # Its ranks dump their Python stacks on SIGUSR1 (execution.hang); for any other probe the signal would
    # just kill the rank, so a timed-out run of it is killed without asking.
    answers_stack_request: bool = False
    #: parameter -> default; unknown parameters are a config error
    defaults: Mapping[str, Any] = {}

    def spec(self, params: Mapping[str, Any], where: str = "probe", backend: str = "gloo") -> ProbeSpec:
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            raise ConfigError(
                f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], self.defaults)} for probe "
                f"{self.name!r}; allowed: {', '.join(sorted(self.defaults))}"
            )
        merged = self.normalize({**self.defaults, **params}, where, backend)
        return ProbeSpec.make(self.name, merged)

    def normalize(self, params: dict[str, Any], where: str, backend: str) -> dict[str, Any]:
        """Check values (ConfigError) and fill backend-dependent defaults; the result is hashed into run keys."""
        for key in ("timeout_s", "grace_s"):
            value = params.get(key)
            if key in params and (not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < math.inf):
                raise ConfigError(f"{where}.{key}: {value!r} not allowed; allowed: a finite number of seconds > 0")
        return params

    @abc.abstractmethod
    def rank_argv(self, spec: ProbeSpec, python: str) -> tuple[str, ...]:
        """argv every rank runs."""

    def rank_env(self, spec: ProbeSpec) -> dict[str, str]:
        return {}

    def missing_here(self, spec: ProbeSpec, python: str) -> Optional[str]:
        """Why no rank of this probe can run on this host (a binary or module it needs is absent), as one line
        naming the key and what to do; None: nothing found missing. Checked once before a command launches."""
        return None

    def check_grids(self, spec: ProbeSpec, grids: Sequence[Any], where: str) -> None:
        """Refuse, before anything runs, a parameter that names ranks no grid of the command has (a ConfigError
        naming ``where``.KEY); nothing to refuse by default."""

    def rank_buffer_bytes(self, spec: ProbeSpec, world: int) -> int:
        """GPU memory one rank's own buffers take at most, besides its CUDA context and NCCL's (planning.placement
        adds those); 0 where the probe cannot tell (a user's command)."""
        return 0

    def metrics(self, ranks: Sequence[RankResult], world: int) -> list[dict[str, Any]]:
        """The run's bench rows: per-rank timings averaged like nccl-tests -a 1."""
        return aggregate_rows((row for r in ranks for row in r.bench), world)

    @abc.abstractmethod
    def interpret(self, rank: RankResult, process: ProcessOutcome, report: Optional[dict[str, Any]], log: str) -> RankResult:
        """Pure: fill outcome/error/root cause of ``rank`` from what the rank left behind."""


class ModuleProbe(Probe):
    """A probe whose ranks run one of envmatrix's Python modules (``python -m rank_module``), which reads the
    probe's parameters from ENVMATRIX_PROBE."""

    rank_module: str = ""

    def rank_argv(self, spec: ProbeSpec, python: str) -> tuple[str, ...]:
        return (python, "-m", self.rank_module)

    def rank_env(self, spec: ProbeSpec) -> dict[str, str]:
        return {"ENVMATRIX_PROBE": json.dumps(spec.params, sort_keys=True)}


def from_process(rank: RankResult, process: ProcessOutcome, log: str) -> RankResult:
    """Outcome when the rank left no verdict of its own: judged by how it ended."""
    rank.pid, rank.exit_code, rank.signal = process.pid, process.exit_code, process.signal
    rank.killed_by, rank.ended_at, rank.log_tail = process.killed_by, process.ended_at, tail(log)
    if process.launch_error:
        rank.outcome, rank.error = LAUNCH_ERROR, process.launch_error
    elif process.killed_by == "timeout":
        rank.outcome = TIMEOUT
        rank.error = f"killed at the probe timeout (phase {rank.phase or 'unknown'})"
    elif process.killed_by == "peer_failure":
        rank.outcome = PEER_KILLED
        rank.error = "stopped after another rank failed"
    elif process.signal:
        rank.outcome, rank.error = CRASH, f"died on {process.signal}"
    elif process.exit_code == 0:
        rank.outcome = PASS
    else:
        rank.outcome, rank.error = EXIT_ERROR, f"exit code {process.exit_code}"
    rank.root_cause_line = root_cause_line(log) if rank.outcome not in (PASS, PEER_KILLED, TIMEOUT) else None
    if rank.outcome == LAUNCH_ERROR:
        rank.root_cause_line = process.launch_error
    return rank


_REGISTRY: Registry[type[Probe]] = Registry("probe")
register = _REGISTRY.decorator("name")
probe_names = _REGISTRY.names


def get_probe(name: str) -> Probe:
    return _REGISTRY.get(name, "probe.name")()
