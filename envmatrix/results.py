"""The one result schema: what every probe, launcher and store speaks.

Per-rank records follow torch elastic's ProcessFailure (exit code, signal, log
tail, failure class); the run's root cause is the first observed failure.
"""

from __future__ import annotations

import functools
import json
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Iterable, Optional

# Ordered from "most specific" to "least": used to pick a run's class when
# several ranks failed at the same instant.
PASS = "pass"
INIT_ERROR = "init_error"
COLLECTIVE_ERROR = "collective_error"
WRONG_RESULT = "wrong_result"
TIMEOUT = "timeout"
CRASH = "crash"
LAUNCH_ERROR = "launch_error"
LAUNCHER_ERROR = "launcher_error"  # the launcher could not start/keep ranks: daemon, host, refusal (launchers.failures)
EXIT_ERROR = "exit_error"  # non-zero exit without a structured rank report
UNRESOLVED = "unresolved"  # command probe exit 125 (git-bisect "skip")
PEER_KILLED = "peer_killed"  # stopped by the harness after another rank failed
ENV_MISMATCH = "env_mismatch"  # some rank did not see the env it was meant to (probes.delivery)
WRONG_TRANSPORT = "wrong_transport"  # traffic took a transport the probe forbids (probes.transport_policy)
SLOW = "slow"  # ran correctly but below an expected busbw / above an expected time (thresholds.judge)

OUTCOMES = (
    PASS,
    INIT_ERROR,
    COLLECTIVE_ERROR,
    WRONG_RESULT,
    TIMEOUT,
    CRASH,
    LAUNCH_ERROR,
    LAUNCHER_ERROR,
    EXIT_ERROR,
    UNRESOLVED,
    ENV_MISMATCH,
    WRONG_TRANSPORT,
    SLOW,
)


# A run's placement kind when its ranks shared GPUs as emulated hosts (planning.placement).
SHARED_GPU = "shared-gpu"


# The most one stored line (a root-cause line, a rank's error) holds: a rank that prints megabytes on one line made
# that line the root cause whole (a 3 MB line: 36 MB results.json, 48 MB store for one 5-setup sweep).
LINE_CHARS = 1000


def clipped(line: str, limit: int = LINE_CHARS) -> str:
    """``line`` cut to ``limit`` characters, the cut said ('... [N more characters]')."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]} ... [{len(line) - limit} more characters]"


# Root causes name ranks as ranges ("NCCL_ALGO missing on ranks 4-7", "ranks 0-2 wait in ..."); one spelling.
def compress_ranks(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2,5,7-8'."""
    parts, run = [], []
    for r in sorted(set(ranks)):
        if run and r == run[-1] + 1:
            run.append(r)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [r]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


@dataclass
class RankResult:
    rank: int
    node: int = 0
    local_rank: int = 0
    pid: Optional[int] = None
    exit_code: Optional[int] = None
    signal: Optional[str] = None
    killed_by: Optional[str] = None  # "timeout" | "peer_failure" | None
    outcome: str = EXIT_ERROR
    phase: Optional[str] = None  # last phase the rank reported entering
    error: Optional[str] = None
    root_cause_line: Optional[str] = None
    ended_at: Optional[float] = None  # wall clock when the rank ended (first failure ordering)
    env: dict[str, str] = field(default_factory=dict)  # NCCL_*/FI_*/LD_*... the rank saw
    versions: dict[str, Any] = field(default_factory=dict)
    device: Optional[str] = None
    # Where the rank ran (rank.identity.host_identity); node/local_rank above are its place in the grid.
    hostname: Optional[str] = None
    gpu_uuid: Optional[str] = None  # "GPU-..." or "cpu"
    pci_bus_id: Optional[str] = None  # "00000000:19:00.0" or "cpu"
    nic: Optional[str] = None  # interface/device the rank's traffic used
    nic_source: Optional[str] = None  # "NET/Socket", "NET/IB" (NCCL's log) or how the rendezvous one was found
    progress: dict[str, Any] = field(default_factory=dict)  # last collective entered: {collective, seq, since}
    timings: dict[str, float] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    bench: list[dict[str, Any]] = field(default_factory=list)  # this rank's timings per (collective, size)
    log_path: Optional[str] = None
    log_tail: str = ""


def column_name(setup: str, condition: Optional[str]) -> str:
    """A matrix column: the setup, and the network condition it ran under when the run had a network axis."""
    return setup if condition is None else f"{setup} @ {condition}"


@dataclass
class ProbeResult:
    run_key: str
    setup: dict[str, Any]
    grid: str
    probe: dict[str, Any]
    backend: str
    launcher: str
    outcome: str
    root_cause: dict[str, Any] = field(default_factory=dict)  # {rank, outcome, line}
    ranks: list[RankResult] = field(default_factory=list)
    started_at: float = 0.0
    finished_at: float = 0.0
    host: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)  # bench rows (per size)
    intended_env: dict[str, str] = field(default_factory=dict)  # setup env as applied
    # the caller's variables every rank inherited beside the setup's (engine.trial.inherited_env); a stored result is
    # reused only under the same; None: stored before it was recorded (reused as before)
    inherited_env: Optional[dict[str, str]] = None
    nccl: dict[str, Any] = field(default_factory=dict)  # parsed NCCL log: version, transports, plugin, warnings
    # argv of every process the launcher started (mpirun/srun: one; local: one per rank), so a cell can be re-run by hand
    argv: list[list[str]] = field(default_factory=list)
    sweep_id: Optional[str] = None
    hang: dict[str, Any] = field(default_factory=dict)  # timeout diagnosis (execution.hang): line, per-rank stacks
    # every expectation that applied (thresholds.Check.to_json: measured, expected, met, line); set by thresholds.judge
    thresholds: list[dict[str, Any]] = field(default_factory=list)
    # where the ranks ran on the host's GPUs (planning.placement.Placement.to_json: kind, label, ranks, gpus,
    # emulated_hosts); {} for launchers that place ranks themselves. A shared-gpu run's bandwidth is not representative.
    placement: dict[str, Any] = field(default_factory=dict)
    # the network condition the run was taken under (network axis): name, value (Condition.describe()), condition
    # (its JSON), proof (qdiscs before/after, `tc -s qdisc show`-like), sent_bytes per shaped link; {} = unshaped
    network: dict[str, Any] = field(default_factory=dict)

    @property
    def shared_gpu(self) -> bool:
        """Ranks shared GPUs (emulated hosts): pass/fail and transport hold, bandwidth figures do not."""
        return self.placement.get("kind") == SHARED_GPU

    @property
    def column(self) -> str:
        """The matrix column this result is a cell of: its setup, with its network condition on a network axis."""
        return column_name(self.setup_name, self.network.get("name") if self.network else None)

    @property
    def condition_name(self) -> str:
        return str(self.network.get("name") or "default")

    @property
    def condition_value(self) -> str:
        return str(self.network.get("value") or "unshaped")

    @property
    def passed(self) -> bool:
        return self.outcome == PASS

    @property
    def duration_s(self) -> float:
        return max(0.0, self.finished_at - self.started_at)

    @property
    def setup_name(self) -> str:
        return str(self.setup.get("name", "?"))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["duration_s"] = round(self.duration_s, 3)
        if not data["network"]:
            del data["network"]  # runs off the network axis are stored (and rendered) as before it existed
        if data["inherited_env"] is None:
            del data["inherited_env"]  # likewise results stored before it was recorded
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ProbeResult":
        """A result as ``to_json`` wrote it; ValueError naming what is wrong when ``data`` is not one (a stored row
        or a results.json cut short, edited or of another tool), never a TypeError from deep inside."""
        data = _known(cls, data, "the result")  # duration_s (derived) is not a field: dropped here
        ranks = data.pop("ranks", [])
        if not isinstance(ranks, list):
            raise ValueError(f"the result's ranks are a JSON {json_kind(ranks)}, not an array")
        return cls(ranks=[RankResult(**_known(RankResult, r, f"rank record {i}")) for i, r in enumerate(ranks)], **data)


def _known(cls: type, data: Any, what: str) -> dict[str, Any]:
    """The fields this version knows: a store a newer envmatrix wrote (a field added since) is read, not a TypeError
    traceback in every command that opens it. ValueError when ``data`` is not a JSON object or lacks a field that
    every version writes."""
    if not isinstance(data, dict):
        raise ValueError(f"{what} is a JSON {json_kind(data)}, not an object")
    known, required = _field_names(cls)
    missing = [name for name in required if name not in data]
    if missing:
        raise ValueError(f"{what} lacks {', '.join(missing)}")
    kinds = _field_kinds(cls)
    for name, value in data.items():
        if name in kinds and json_kind(value) not in kinds[name]:
            raise ValueError(f"{what}'s {name} is a JSON {json_kind(value)}, not {' or '.join(sorted(kinds[name]))}")
    return {k: v for k, v in data.items() if k in known}


@functools.lru_cache(maxsize=None)
def _field_names(cls: type) -> tuple[frozenset[str], tuple[str, ...]]:
    """(every field, those without a default) of a result class: read once, not per stored result and rank."""
    return (frozenset(f.name for f in fields(cls)),
            tuple(f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING))


_JSON_KIND = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean",
              type(None): "null"}


@functools.lru_cache(maxsize=None)
def _field_kinds(cls: type) -> dict[str, frozenset[str]]:
    """Field -> the JSON kinds its annotation allows (a wrong one read back would fail far from the store, as
    ``'str' object has no attribute 'get'`` in every report); fields typed Any are left out."""
    out = {}
    for name, hint in typing.get_type_hints(cls).items():
        parts = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
        kinds = {_JSON_KIND.get(typing.get_origin(part) or part) for part in parts}
        if None not in kinds:
            out[name] = frozenset(kinds)
    return out


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string"}.get(type(value), "number")
