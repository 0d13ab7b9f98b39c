"""The built-in probe: torch.distributed init + value-checked collectives per rank,
optionally followed by a timed bench over a size sweep."""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

from envmatrix import values
from envmatrix.bench.formulas import ALL
from envmatrix.bench.sizes import DTYPE_BYTES, SWEEP_KEYS, parse_size, size_sweep
from envmatrix.bench.timing import DEFAULT_TIMING, check_timing
from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.boundary import ProcessOutcome
from envmatrix.planning.plan import ProbeSpec
from envmatrix.probes.base import ModuleProbe, from_process, register
from envmatrix.probes.rootcause import root_cause_line
from envmatrix.probes.transport_policy import forbidden_transports
from envmatrix.results import PASS, PEER_KILLED, TIMEOUT, RankResult

COLLECTIVES = ("allreduce", "allgather", "alltoall")
DTYPES = tuple(DTYPE_BYTES)
BENCH_DEFAULTS = {
    "collectives": ["allreduce", "allgather", "alltoall"],
    "min_bytes": 8,
    "max_bytes": None,  # 1G on GPUs, 1M on CPU
    "factor": 2.0,
    "step_bytes": None,
    "iters": 20,
    "warmup": 5,
    "dtype": "float32",
    "check": True,
    "timing": DEFAULT_TIMING,  # see envmatrix/bench/timing.py
    # who talks to whom (issue 34), planned by the driver for the run's grid: planning/peers.to_spec (the
    # alltoall_rail/cross/all rows read it) and planning/pairs rounds of rank pairs (the pair_* rows read them)
    "peer_plan": None,
    "pair_rounds": None,
}


def default_max_bytes(backend: str) -> int:
    return (1 << 30) if backend == "nccl" else (1 << 20)


def normalize_bench(raw: Any, where: str, backend: str) -> Optional[dict[str, Any]]:
    if raw is None or raw is False:  # 0 == False: bench: 0 was taken as no bench, as hermetic: 5 was true
        return None
    if raw is not True and not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: {raw!r} is not a mapping; allowed: true, or a mapping such as "
                          "{collectives: [allreduce], min_bytes: 4K, max_bytes: 1M}")
    raw = {} if raw is True else dict(raw)
    unknown = sorted(set(raw) - set(BENCH_DEFAULTS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], BENCH_DEFAULTS)}; allowed: {', '.join(BENCH_DEFAULTS)}")
    bench = {**BENCH_DEFAULTS, **raw}
    colls = bench_collectives(bench["collectives"], f"{where}.collectives")
    check_timing(bench["timing"], backend, f"{where}.timing")
    bench_dtype(bench["dtype"], f"{where}.dtype")
    if bench["max_bytes"] is None:
        bench["max_bytes"] = default_max_bytes(backend)
    bench["min_bytes"] = parse_size(bench["min_bytes"], f"{where}.min_bytes")
    bench["max_bytes"] = parse_size(bench["max_bytes"], f"{where}.max_bytes")
    if bench["step_bytes"] is not None:
        bench["step_bytes"] = parse_size(bench["step_bytes"], f"{where}.step_bytes")
    factor = bench["factor"]
    if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float))):  # was: a TypeError
        raise ConfigError(f"{where}.factor: {factor!r} is not a number; allowed: a number > 1 (or give {where}.step_bytes)")
    if isinstance(factor, float) and not math.isfinite(factor):  # nan, .inf: int(size * factor) raised
        raise ConfigError(f"{where}.factor: {factor!r} is not a finite number; allowed: a number > 1 (or give "
                          f"{where}.step_bytes)")
    if not isinstance(bench["check"], bool):  # 'no' was true
        raise ConfigError(f"{where}.check: {bench['check']!r} not allowed; allowed: true, false")
    for key in ("iters", "warmup"):
        if not isinstance(bench[key], int) or isinstance(bench[key], bool) or bench[key] < (1 if key == "iters" else 0):
            raise ConfigError(f"{where}.{key}: {bench[key]!r} not allowed; allowed: an integer >= {1 if key == 'iters' else 0}")
    bench["sizes"] = size_sweep(bench["min_bytes"], bench["max_bytes"], bench["factor"], bench["step_bytes"],
                                {key: f"{where}.{key}" for key in SWEEP_KEYS})
    bench["collectives"] = colls
    return bench


def bench_collectives(raw: Any, key: str) -> list[str]:
    """The bench's collectives (one name or a list), each known and named once; ``key`` as the user wrote it."""
    if not isinstance(raw, (str, list, tuple)):  # null or a number: list() of it was a TypeError traceback
        raise ConfigError(f"{key}: {raw!r} is not a list; allowed: one or more of {', '.join(ALL)}")
    colls = [raw] if isinstance(raw, str) else list(raw)
    bad = [c for c in colls if not isinstance(c, str) or c not in ALL]  # a list or mapping in it: unhashable
    if bad or not colls:
        raise ConfigError(f"{key}: {repr(bad[0]) + ' not allowed' if bad else 'none given'}; allowed: one or more of "
                          f"{', '.join(ALL)}")
    values.distinct(key, colls, "each collective once")
    return colls


def bench_dtype(dtype: Any, key: str) -> str:
    if dtype not in DTYPES:
        raise ConfigError(f"{key}: {dtype!r} not allowed; allowed: {', '.join(DTYPES)}")
    return dtype


NCCL_DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "TRACE")
TEARDOWNS = ("destroy", "exit")


def check_nccl_debug(params: dict[str, Any], where: str) -> None:
    """``nccl_debug`` (a level or null) and ``nccl_debug_subsys`` (text such as INIT,NET, or a list of subsystems) of
    the probes that capture NCCL's log, in place: a number or "['INIT', 'NET']" reached NCCL as NCCL_DEBUG_SUBSYS."""
    level = params.get("nccl_debug")
    if level is not None and str(level).upper() not in NCCL_DEBUG_LEVELS:
        raise ConfigError(f"{where}.nccl_debug: {level!r} not allowed; allowed: {', '.join(NCCL_DEBUG_LEVELS)} or null")
    params["nccl_debug"] = None if level is None else str(level).upper()
    subsys = params.get("nccl_debug_subsys")
    if isinstance(subsys, (list, tuple)) and subsys and all(isinstance(v, str) and v for v in subsys):
        subsys = ",".join(subsys)
    if not isinstance(subsys, str) or not subsys.strip():
        raise ConfigError(f"{where}.nccl_debug_subsys: {subsys!r} not allowed; allowed: NCCL subsystems as text such as "
                          "INIT,NET, or a list [INIT, NET]")
    params["nccl_debug_subsys"] = subsys


def nccl_debug_env(params: Mapping[str, Any]) -> dict[str, str]:
    level = params.get("nccl_debug")
    if not level:
        return {}
    return {"NCCL_DEBUG": str(level), "NCCL_DEBUG_SUBSYS": str(params.get("nccl_debug_subsys") or "INIT,NET")}


@register
class BuiltinProbe(ModuleProbe):
    name = "builtin"
    rank_module = "envmatrix.rank.main"
    answers_stack_request = True  # rank.main.install_stack_dump
    defaults = {
        "collectives": list(COLLECTIVES),
        "numel": 4096,
        "timeout_s": 120.0,
        "grace_s": 5.0,
        "bench": None,
        "nccl_debug": None,  # e.g. INFO: capture NCCL's log per rank (transports, plugin, warnings)
        "nccl_debug_subsys": "INIT,NET",
        "forbid_transport": [],  # e.g. [NET]: fail when NCCL's log shows traffic on such a transport
        "nccl_dump_topology": False,  # NCCL_TOPO_DUMP_FILE / NCCL_GRAPH_DUMP_FILE into the run dir (nccl backend)
        "stall": None,  # fault injection: {rank: R, seq: N} -> rank R stops before its Nth collective (0: before init; a hang)
        "async_op": False,  # checks call collectives with async_op=True and wait on the handle (NCCL's behaviour, on gloo)
        # After a passing verdict: destroy the process group (a destroy that hangs or fails is seen), or exit at once
        # (~0.5 s less per config on H200, benchmarks/throughput.md; the driver frees the context; destroy goes unchecked).
        "teardown": "destroy",
    }

    def normalize(self, params: dict[str, Any], where: str, backend: str) -> dict[str, Any]:
        colls = params["collectives"] = [params["collectives"]] if isinstance(params["collectives"], str) else params["collectives"]
        if not isinstance(colls, (list, tuple)):  # null or a number: iterating it was a TypeError traceback
            raise ConfigError(f"{where}.collectives: {colls!r} is not a list; allowed: a non-empty subset of {', '.join(COLLECTIVES)}")
        bad = [c for c in colls if c not in COLLECTIVES]
        if bad or not colls:
            raise ConfigError(f"{where}.collectives: {bad or '[]'} not allowed; allowed: a non-empty subset of {', '.join(COLLECTIVES)}")
        values.distinct(f"{where}.collectives", list(params["collectives"]), "each collective once")
        if not isinstance(params["numel"], int) or isinstance(params["numel"], bool) or params["numel"] < 1:
            raise ConfigError(f"{where}.numel: {params['numel']!r} not allowed; allowed: an integer >= 1")
        params["bench"] = normalize_bench(params.get("bench"), f"{where}.bench", backend)
        check_nccl_debug(params, where)
        params["forbid_transport"] = forbidden_transports(params.get("forbid_transport"), f"{where}.forbid_transport")
        stall = params.get("stall")
        if stall is not None and not (isinstance(stall, dict) and set(stall) == {"rank", "seq"}
                                      and all(isinstance(v, int) and not isinstance(v, bool) for v in stall.values())
                                      and stall["rank"] >= 0 and stall["seq"] >= 0):
            raise ConfigError(f"{where}.stall: {stall!r} not allowed; allowed: null or {{rank: R >= 0, seq: N >= 0}}")
        if not isinstance(params.get("async_op"), bool):
            raise ConfigError(f"{where}.async_op: {params.get('async_op')!r} not allowed; allowed: true, false")
        if params.get("teardown") not in TEARDOWNS:
            raise ConfigError(f"{where}.teardown: {params.get('teardown')!r} not allowed; allowed: {', '.join(TEARDOWNS)}")
        if not isinstance(params.get("nccl_dump_topology"), bool):
            raise ConfigError(f"{where}.nccl_dump_topology: {params.get('nccl_dump_topology')!r} not allowed; allowed: true, false")
        if params["forbid_transport"] and backend == "gloo":
            # every cell would fail for want of a log, whatever its traffic: said before anything runs
            raise ConfigError(f"{where}.forbid_transport: {params['forbid_transport']} is checked on NCCL's log, and "
                              "backend gloo runs no NCCL; allowed: [] on gloo, or backend=nccl")
        if params["forbid_transport"] and not params["nccl_debug"]:
            params["nccl_debug"] = "INFO"  # the policy is checked on NCCL's own log
        return super().normalize(params, where, backend)

    def check_grids(self, spec: ProbeSpec, grids: Sequence[Any], where: str) -> None:
        stall = spec.params.get("stall")
        largest = max((grid.nodes * grid.ppn for grid in grids), default=0)
        if stall is not None and grids and stall["rank"] >= largest:  # the fault would never fire: every cell passes
            raise ConfigError(f"{where}.stall: rank {stall['rank']} is on no grid ({', '.join(map(str, grids))}: ranks "
                              f"0..{largest - 1}); allowed: a rank below {largest}")

    def rank_buffer_bytes(self, spec: ProbeSpec, world: int) -> int:
        params = spec.params
        bench = params.get("bench")
        if bench:
            # Per rank: the direct launches' two ncclMemAlloc buffers of -e bytes, and torch's send and receive
            # buffers of the largest size (rank/collective_timer.py).
            return 4 * int(bench["max_bytes"])
        return 2 * 4 * int(params.get("numel") or 0) * max(1, world)  # the checks' float32 send and gathered receive

    def rank_env(self, spec: ProbeSpec) -> dict[str, str]:
        return {**super().rank_env(spec), **nccl_debug_env(spec.params)}

    def interpret(self, rank: RankResult, process: ProcessOutcome, report: Optional[dict[str, Any]], log: str) -> RankResult:
        if report:
            rank.phase = report.get("phase")
            for key in ("env", "versions", "device", "timings", "checks", "bench", "progress",
                        "hostname", "gpu_uuid", "pci_bus_id", "nic", "nic_source"):
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
