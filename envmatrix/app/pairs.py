"""``envmatrix bench --pairs gpus|hosts``'s lifecycle: who talks to whom, pair by pair (issue 34).

``gpus``: every GPU pair of this host (or a list), one rank per GPU, one pair at a time (planning/pairs.py): each
ordered pair's one-way bandwidth at the pair size, each pair's bidirectional bandwidth and latency, NCCL's
transport per pair from the ranks' NCCL logs and ``nvidia-smi topo -m``'s link type; one matrix per setup, the
ratio of two. ``hosts``: one rank per host, pairs in rounds of disjoint pairs that run at the same time: the p2p
round trip, time and bandwidth per ordered pair, then per round the tools (ping, iperf3: the netpair probe);
judgement/pairs.py names the slow pairs and the slow host.
"""

from __future__ import annotations

import dataclasses
import os
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from envmatrix import paths as em_paths
from envmatrix import values
from envmatrix.app.inputs import named_setup, prepare
from envmatrix.app.outputs import RunOutputs, write_run_outputs
from envmatrix.app.report import stored_cells
from envmatrix.bench.sizes import format_size, parse_size
from envmatrix.env.atoms import Setup
from envmatrix.errors import ConfigError
from envmatrix.judgement.pairs import DEFAULT_TOLERANCE, PairFigure, PairsJudgement, flag_below_class, judge_pairs
from envmatrix.planning.grid import Grid, parse_grid
from envmatrix.planning.pairs import gpu_pair_rounds, host_pair_rounds, parse_gpu_pairs
from envmatrix.probes import get_probe
from envmatrix.probes.builtin import bench_dtype
from envmatrix.results import ProbeResult

KINDS = ("gpus", "hosts")
DEFAULT_PAIR_SIZE = {"gpus": "256M", "hosts": "64M"}  # hosts: seed 000's 64 MB


@dataclass(frozen=True)
class PairsRequest:
    kind: str  # gpus | hosts
    overrides: tuple[str, ...] = ()
    setups: tuple[str, ...] = ()  # one matrix per setup (gpus); none: the inherited env only
    env: tuple[str, ...] = ()  # KEY=VALUE on top of each setup
    grid: Optional[str] = None  # hosts: Nx1 on emulated hosts when the config names none
    gpu_pairs: Optional[str] = None  # gpus: "0-3,1-7" instead of every pair
    pair_size: Optional[str] = None
    latency_size: str = "8"
    iters: int = 20
    warmup: int = 2
    dtype: str = "float32"
    iperf_seconds: int = 10  # seed 000: iperf3 -t 10
    tolerance: float = DEFAULT_TOLERANCE
    timeout: Optional[float] = None  # None: the config's probe.timeout_s when the user set it, else 600 s (as bench)
    out: Optional[str] = None
    allow_unknown_vars: bool = False
    rerun: bool = False
    command_line: str = "envmatrix bench"  # who holds the store's lock


@dataclass
class GpuMatrix:
    setup: str
    result: ProbeResult
    cells: dict  # (src, dst) -> reporting.pairs_tables.GpuPairCell
    flags: dict  # (src, dst) -> ratio to its link class's median, where judged slow


@dataclass
class PairsResult:
    kind: str
    report: str  # RUN_DIR/pairs_<kind>.md
    markdown: str
    outputs: RunOutputs
    exit_code: int
    gpus: list[int] = field(default_factory=list)
    matrices: list[GpuMatrix] = field(default_factory=list)
    judgement: Optional[PairsJudgement] = None
    host_rows: list = field(default_factory=list)
    results: list[ProbeResult] = field(default_factory=list)


def pairs(request: PairsRequest, listener: Any = None) -> PairsResult:
    if request.kind not in KINDS:
        raise ConfigError(f"--pairs {request.kind!r} not allowed; allowed: {', '.join(KINDS)}")
    if request.kind == "hosts" and (not isinstance(request.iperf_seconds, int) or request.iperf_seconds < 1):
        raise ConfigError(f"--iperf-seconds {request.iperf_seconds!r} not allowed; allowed: a whole number of seconds "
                          ">= 1 (iperf3 -t)")
    if not 0 < request.tolerance < 1:
        raise ConfigError(f"--pair-tolerance {request.tolerance!r} not allowed; allowed: a fraction between 0 and 1")
    if request.kind == "hosts" and request.gpu_pairs is not None:
        raise ConfigError(f"--gpu-pairs {request.gpu_pairs}: only with --pairs gpus; allowed: drop --gpu-pairs "
                          "(--pairs hosts measures every host pair)")
    if request.kind == "hosts" and len(request.setups) > 1:
        raise ConfigError(f"--setup {','.join(request.setups)}: --pairs hosts measures one setup; allowed: one setup "
                          "(a comma list is --pairs gpus's, one matrix per setup)")
    # under the flags' own names, before the run directory exists (the probe's check names its keys, after it)
    values.integer("-n/--iters", request.iters, minimum=1)
    values.integer("-w/--warmup", request.warmup, minimum=0)
    bench_dtype(request.dtype, "-d/--dtype")
    if request.timeout is not None:
        values.duration("--timeout", request.timeout)
    return _gpu_pairs(request, listener) if request.kind == "gpus" else _host_pairs(request, listener)


def _with_timeout(request: PairsRequest, inp: Any) -> PairsRequest:
    """The probe timeout as bench takes it: --timeout, else the config's probe.timeout_s where the user set one, else
    600 s. The pairs take nothing else of the config's probe: their sizes and iterations are their own flags'."""
    from envmatrix.app.bench import config_probe, probe_timeout

    params, configured = config_probe(inp, request.overrides)
    return dataclasses.replace(request, timeout=probe_timeout(request.timeout, params, configured))


def _sizes(request: PairsRequest) -> tuple[int, int]:
    """The pair and latency sizes in whole elements of the dtype, as the ranks measure them (nccl-tests rounds
    down too): a 10-byte float32 pair size was measured as 8 bytes and looked up as 10, an empty table, exit 0."""
    from envmatrix.bench.sizes import DTYPE_BYTES, aligned_count

    item = DTYPE_BYTES[request.dtype]
    large = parse_size(DEFAULT_PAIR_SIZE[request.kind] if request.pair_size is None else request.pair_size, "--pair-size")
    small = parse_size(request.latency_size, "--latency-size")
    large, small = (aligned_count(size, item, 2, False) * item for size in (large, small))
    if small >= large:
        raise ConfigError(f"--latency-size {request.latency_size}: not below --pair-size {format_size(large)} (in whole "
                          f"{request.dtype} elements: {format_size(small)} and {format_size(large)}); allowed: a latency "
                          "size smaller than the pair size")
    return large, small


def _setups(inp: Any, request: PairsRequest, catalog: Any) -> list[Setup]:
    from envmatrix.app.bench import env_flag_atoms, with_env

    bases = [named_setup(inp, name) for name in request.setups] if request.setups else [Setup("env")]
    extra = env_flag_atoms(request.env, catalog, request.allow_unknown_vars)
    return [with_env(base, extra, named=bool(request.setups)) for base in bases]


def _bench_probe(inp: Any, request: PairsRequest, collectives: list[str], rounds: list, large: int, small: int,
                 **params: Any) -> Any:
    bench = {"collectives": collectives, "min_bytes": small, "max_bytes": large, "step_bytes": large - small,
             "iters": request.iters, "warmup": request.warmup, "dtype": request.dtype, "check": True,
             "timing": "blocking", "pair_rounds": [[list(p) for p in r] for r in rounds]}
    return get_probe("builtin").spec({"bench": bench, "timeout_s": request.timeout, "collectives": ["allreduce"],
                                      **params}, "bench --pairs", inp.backend)


class Steps:
    """One progress over a pairs command's one-run sweeps (GPU pairs: a run per setup; host pairs: the p2p run, then
    a run per round): the listener hears one start, one end and each result numbered among all ``total`` runs.

    The start counts the stored runs of the first sweep only: the later runs' keys are not known before it ends."""

    def __init__(self, listener: Any, total: int) -> None:
        self.listener, self.total, self.step = listener, total, 0
        self.before = {"done": 0, "skipped": 0, "passed": 0, "failed": 0}
        self.started: Optional[float] = None

    def __call__(self, event: str, progress: Any, result: Optional[ProbeResult]) -> None:
        if event == "start":
            self.step += 1
            self.started = self.started if self.started is not None else progress.started
        whole = dataclasses.replace(progress, total=self.total, started=self.started,
                                    **{k: v + getattr(progress, k) for k, v in self.before.items()})
        if event == "end":
            self.before = {k: getattr(whole, k) for k in self.before}
        if self.listener is not None and not (event == "start" and self.step > 1) and not (
                event == "end" and self.step < self.total):
            self.listener(event, whole, result)


def _check_fits(inp: Any, gpus: int) -> Any:
    """The launcher of ``inp``, once its grids fit where it puts the ranks (ConfigError otherwise)."""
    from envmatrix.config.resolve import check_grids_fit

    launcher = inp.make_launcher()
    check_grids_fit(list(inp.grids), inp.backend, gpus, int(inp.config.get("max_local_ranks", 16)), launcher)
    return launcher


def _run_one(inp: Any, store: Any, run_dir: str, pins: Any, gpus: int, request: PairsRequest, listener: Any,
             probe_for: Optional[Callable[[Any], Any]] = None) -> tuple:
    """``probe_for(session)``: the probe made once the session exists (what it needs to know of the session's hosts)."""
    from envmatrix.app.sweep import plan_sweep, run_sweep
    from envmatrix.engine import open_session

    launcher = _check_fits(inp, gpus)
    with open_session(inp, run_dir, pins, gpus, pool=True, launcher=launcher, store=store) as session:
        if probe_for is not None:
            inp = dataclasses.replace(inp, probe=probe_for(session))
            session = session.under(probe_spec=inp.probe)
        _, done = run_sweep(inp, session, plan_sweep(inp), rerun=request.rerun, listener=listener)
        return done[-1], session.host


# ------------------------------------------------------------------------------------------------ GPU pairs


def pair_transports(result: ProbeResult) -> dict[tuple[int, int], str]:
    """(sender GPU, receiver GPU) -> NCCL's transport, from every rank's NCCL log (device numbers as NCCL prints)."""
    from envmatrix.parsers.nccl_log import device_pair_transports

    found: dict[tuple[int, int], str] = {}
    for rank in result.ranks:
        try:
            with open(rank.log_path or "", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue
        for (src, dst), transport in device_pair_transports(text).items():
            if src.isdigit() and dst.isdigit():
                found.setdefault((int(src), int(dst)), transport)
    return found


def physical_links(links: dict[tuple[int, int], str], gpus: int,
                   visible: Optional[str] = None) -> dict[tuple[int, int], str]:
    """topo -m numbers GPUs as nvidia-smi does; ranks use CUDA's visible indices: map through CUDA_VISIBLE_DEVICES
    when it lists GPU numbers (UUIDs: no map, no links rather than wrong ones)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    if not visible:
        return links
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    if not all(v.isdigit() for v in ids):
        return {}
    physical = [int(v) for v in ids][:gpus]
    return {(a, b): links[(physical[a], physical[b])] for a in range(len(physical)) for b in range(len(physical))
            if (physical[a], physical[b]) in links}


def _gpu_pairs(request: PairsRequest, listener: Any) -> PairsResult:
    from envmatrix.engine import open_store_at
    from envmatrix.store.lock import exclusive
    from envmatrix.parsers.nvidia_topo import parse_topo_matrix
    from envmatrix.reporting.pairs_tables import gpu_cells

    base, gpus, pins, catalog = prepare(request.overrides, request.allow_unknown_vars, setups_optional=True)
    request = _with_timeout(request, base)
    if len(gpus) < 2:
        raise ConfigError(f"--pairs gpus: {len(gpus)} GPU{'' if len(gpus) == 1 else 's'} visible here; allowed: a host with 2 or more GPUs "
                          "(each pair is two ranks, one on each GPU)")
    large, small = _sizes(request)
    rounds = gpu_pair_rounds(len(gpus), None if request.gpu_pairs is None else parse_gpu_pairs(request.gpu_pairs))
    grid = Grid(1, len(gpus))
    base = dataclasses.replace(base, name="pairs-gpus", grids=(grid,))
    setups = _setups(base, request, catalog)  # bad input stops here, before the run directory exists
    run_dir = em_paths.run_dir(request.out, "bench")
    matrices = []
    listener = Steps(listener, len(setups))
    with exclusive(os.path.join(run_dir, em_paths.STORE_FILE), request.command_line), open_store_at(run_dir) as store:
        for setup in setups:
            inp = dataclasses.replace(base, setups=(setup,))
            inp = dataclasses.replace(inp, probe=_bench_probe(inp, request, ["pair_uni", "pair_bidir", "pair_latency"],
                                                              rounds, large, small, nccl_debug="INFO"))
            result, host = _run_one(inp, store, run_dir, pins, len(gpus), request, listener)
            links = physical_links(parse_topo_matrix(host.get("topology") or "").links, len(gpus))
            cells = gpu_cells(result.metrics, large, small, pair_transports(result), links)
            uni = {p: c.uni_gbps for p, c in cells.items() if c.uni_gbps is not None}
            flags = flag_below_class(uni, {p: c.link or "?" for p, c in cells.items()}, request.tolerance)
            matrices.append(GpuMatrix(setup.name, result, cells, flags))
        stored = stored_cells(store)  # the page's cells, as `envmatrix report` reads them
    gpu_ids = list(range(len(gpus)))
    text = gpu_pairs_markdown(matrices, gpu_ids, large, small)
    path = _write(run_dir, "pairs_gpus", text, _gpu_heatmaps(matrices, gpu_ids))
    failed = any(not m.result.passed or any(c.wrong for c in m.cells.values()) for m in matrices)
    flagged = any(f is not None for m in matrices for f in m.flags.values())
    return PairsResult("gpus", path, text, write_run_outputs(run_dir, stored=stored), 1 if failed or flagged else 0,
                       gpus=gpu_ids, matrices=matrices, results=[m.result for m in matrices])


def gpu_pairs_markdown(matrices: list[GpuMatrix], gpus: list[int], large: int, small: int) -> str:
    from envmatrix.reporting.pairs_tables import gpu_matrix, markdown_table, ratio_matrix

    out = ["# GPU pairs", "",
           f"One rank per GPU, one pair at a time; bandwidth at {format_size(large)} (GB/s), latency at "
           f"{format_size(small)} (us, one way: half a ping-pong). Cell: figure, `nvidia-smi topo -m` link, NCCL "
           "transport; `!r`: more than the tolerance below its link class's median (r: the ratio).", ""]
    for m in matrices:
        head = f"## {m.setup} on {m.result.grid} ({m.result.outcome})"
        for what, title in (("uni", "one way (GB/s)"), ("bidir", "both ways at once (GB/s)"), ("latency", "latency (us)")):
            out += [f"{head}: {title}", "", markdown_table(*gpu_matrix(m.cells, gpus, what, m.flags if what == "uni" else None)), ""]
    if len(matrices) == 2:
        a, b = matrices
        out += [f"## ratio {b.setup} / {a.setup}: one way", "", markdown_table(*ratio_matrix(a.cells, b.cells, gpus)), ""]
    return "\n".join(out)


def _gpu_heatmaps(matrices: list[GpuMatrix], gpus: list[int]) -> str:
    from envmatrix.reporting.pairs_tables import heatmap_html

    parts = []
    labels = [f"GPU{g}" for g in gpus]
    for m in matrices:
        notes = {p: f"{c.link or '?'} {c.transport or '?'}" for p, c in m.cells.items()}
        parts.append(heatmap_html(f"{m.setup}: one way GB/s (row sends to column)", labels,
                                  {p: c.uni_gbps for p, c in m.cells.items()}, notes))
        parts.append(heatmap_html(f"{m.setup}: latency us", labels, {p: c.latency_us for p, c in m.cells.items()},
                                  notes, unit="us", higher_is_better=False))
    return "\n".join(parts)


# ------------------------------------------------------------------------------------------------ host pairs


def _host_grid(base: Any, request: PairsRequest) -> Grid:
    hosts = list(base.config.get("hosts") or [])
    if request.grid:
        grid = parse_grid(request.grid, "--grid")
        if grid.ppn != 1:
            raise ConfigError(f"--grid {request.grid}: --pairs hosts runs one rank per host; allowed: Nx1")
        return grid
    if len(hosts) >= 2:
        return Grid(len(hosts), 1)
    if hosts:
        raise ConfigError(f"--pairs hosts: hosts: [{hosts[0]}] is one host; allowed: 2 or more hosts (a pair needs "
                          "two), or --grid Nx1 for N emulated hosts here")
    raise ConfigError("--pairs hosts: no hosts; allowed: a config with hosts: [a, b, ...] (2 or more), "
                      "or --grid Nx1 for N emulated hosts here")


def _host_pairs(request: PairsRequest, listener: Any) -> PairsResult:
    from envmatrix.config.resolve import check_cpu_memory
    from envmatrix.engine import open_store_at
    from envmatrix.store.lock import exclusive

    base, gpus, pins, catalog = prepare(request.overrides, request.allow_unknown_vars, setups_optional=True)
    request = _with_timeout(request, base)
    large, small = _sizes(request)
    grid = _host_grid(base, request)
    rounds = host_pair_rounds(grid.nodes)
    setup = _setups(base, request, catalog)[0]
    base = dataclasses.replace(base, name="pairs-hosts", grids=(grid,), setups=(setup,))
    launcher = _check_fits(base, len(gpus))  # --grid 6x1 on 5 hosts: refused before the run directory exists
    probe = _bench_probe(base, request, ["pair_uni", "pair_latency"], rounds, large, small)
    # emulated hosts' ranks share this host's memory: --pair-size 1T was launched and failed in every rank
    check_cpu_memory([grid], base.backend, launcher, get_probe("builtin"), probe, "--pair-size")
    run_dir = em_paths.run_dir(request.out, "bench")
    listener = Steps(listener, 1 + len(rounds))
    with exclusive(os.path.join(run_dir, em_paths.STORE_FILE), request.command_line), open_store_at(run_dir) as store:
        inp = dataclasses.replace(base, probe=probe)
        p2p, _ = _run_one(inp, store, run_dir, pins, len(gpus), request, listener)
        configured = [str(h) for h in base.config.get("hosts") or []]  # "fe80::1" was "fe80"
        hosts = host_labels(p2p, configured, grid.nodes)
        # where each rank's tools reach its partner: the hostname it reported (real or namespace hosts resolve
        # it); with the local launcher every emulated host is this host, and so it is where a cluster launcher
        # with no hosts put every rank on one (mpirun --grid 4x1: the labels node0.. resolve nowhere, and each
        # round waited out iperf3's server for ~70 s to say "Name or service not known" in every cell)
        one_host = not configured and len({r.hostname for r in p2p.ranks if r.hostname}) <= 1
        reach = ["127.0.0.1"] * grid.nodes if base.launcher == "local" or one_host else hosts
        # iperf3's own port between real hosts; emulated hosts share this host's ports with any other command's
        # run here, so each run directory (held exclusively, above) takes its own range. Not the pid: the port is
        # in each round's run key, so a pid-derived one made the same command again (resume after Ctrl-C) miss
        # every stored round and measure all of them again
        port = 20000 + zlib.crc32(os.path.realpath(run_dir).encode()) % 20000 if base.launcher == "local" else 5201
        net = []
        for pairs_ in rounds:
            def netpair(session: Any, pairs_: list = pairs_) -> Any:
                # hosts in namespaces of the session's own (emulate_hosts: {namespaces: true}) reach each other at
                # their bridge addresses: 127.0.0.1 there is each namespace's own loopback, and every tool failed
                addresses = [seat.address for seat in session.host_seats] or reach
                return get_probe("netpair").spec({"pairs": [list(p) for p in pairs_], "addresses": addresses,
                                                  "iperf_seconds": request.iperf_seconds, "timeout_s": request.timeout,
                                                  "port": port}, "bench --pairs hosts", base.backend)
            done, _ = _run_one(base, store, run_dir, pins, len(gpus), request, listener, probe_for=netpair)
            net.append(done)
        stored = stored_cells(store)  # the page's cells, as `envmatrix report` reads them
    return _host_outcome(request, run_dir, p2p, net, hosts, rounds, large, small, stored)


def _host_outcome(request: PairsRequest, run_dir: str, p2p: ProbeResult, net: list[ProbeResult], hosts: list[str],
                  rounds: list, large: int, small: int, stored: list) -> PairsResult:
    from envmatrix.reporting.pairs_tables import host_pair_rows, typical_gbps

    uni = {tuple(m["pair"]): m for m in p2p.metrics if m.get("collective") == "pair_uni" and m.get("size_bytes") == large}
    figures = []
    for number, pairs_ in enumerate(rounds):
        for a, b in pairs_:
            ways = [typical_gbps(uni[p]) for p in ((a, b), (b, a)) if p in uni]
            if len(ways) == 2:
                figures.append(PairFigure(number, hosts[a], hosts[b], min(ways)))
    judgement = judge_pairs(figures, request.tolerance) if figures else None
    slow = {(v.figure.a, v.figure.b) for v in (judgement.pairs if judgement else []) if v.slow}
    index = {h: i for i, h in enumerate(hosts)}
    judged = {}
    for a, b in slow:
        judged[(index[a], index[b])] = judged[(index[b], index[a])] = "slow pair"
    net_rows = [row for r in net for row in r.metrics]
    iperf3_status, ping_status = tool_status(net, rounds, "iperf3"), tool_status(net, rounds, "ping")
    rows = host_pair_rows(p2p.metrics, net_rows, hosts, large, small, iperf3_status, ping_status, judged)
    text = host_pairs_markdown(rows, judgement, p2p, large, small)
    path = _write(run_dir, "pairs_hosts", text, _host_heatmap(rows, hosts))
    failed = not p2p.passed or any(not r.passed for r in net) or any(int(m.get("wrong") or 0) for m in p2p.metrics)
    found = bool(judgement and (judgement.slow_hosts or judgement.slow_links))
    return PairsResult("hosts", path, text, write_run_outputs(run_dir, stored=stored), 1 if failed or found else 0,
                       judgement=judgement, host_rows=rows, results=[p2p, *net])


def tool_status(net: list[ProbeResult], rounds: list, tool: str) -> dict[frozenset, str]:
    """Per pair, why a tool has no figure: "not installed" on a host of the pair, its error, or how its round ended."""
    out: dict[frozenset, str] = {}
    for result, pairs_ in zip(net, rounds):
        ranks = {r.rank: r for r in result.ranks}
        for a, b in pairs_:
            mine = [ranks[x] for x in (a, b) if x in ranks]
            missing = [r for r in mine if r.versions.get(tool) == "not installed"]
            errors = [c["error"] for r in mine for c in r.checks if c.get("error", "").startswith(tool)]
            out[frozenset((a, b))] = ("not installed" if missing else f"failed: {errors[0]}" if errors
                                      else "-" if result.passed else f"{result.outcome}: {result.root_cause.get('line')}")
    return out


def host_labels(p2p: ProbeResult, configured: list[str], n: int) -> list[str]:
    """Each rank's host: its reported hostname, else the config's host; hosts reporting one name (containers with
    one hostname, emulated hosts) get the config's hosts in rank order, else node0.. (their place in the grid).
    node0.. for configured hosts named the wrong ones: hosts [b, a] gave rank 0, host b, the label node0."""
    by_rank = {r.rank: r.hostname for r in p2p.ranks if r.hostname}
    names = [by_rank.get(r) or (configured[r] if r < len(configured) else f"node{r}") for r in range(n)]
    if len(set(names)) == n:
        return names
    return configured[:n] if len(set(configured[:n])) == n else [f"node{r}" for r in range(n)]


def host_pairs_markdown(rows: list, judgement: Optional[PairsJudgement], p2p: ProbeResult, large: int, small: int) -> str:
    from envmatrix.reporting.pairs_tables import host_pair_table, markdown_table

    out = ["# Host pairs", "",
           f"One rank per host; pairs in rounds of disjoint pairs run at the same time. RTT p2p: a {format_size(small)} "
           f"ping-pong over {p2p.backend}; {p2p.backend}-T/-B: one {format_size(large)} message, sender to receiver, "
           f"at the median of its {_iters(p2p)} iterations (the figure judged); "
           "ping and iperf3 (TCP, receiver as server) where installed.", "",
           markdown_table(*host_pair_table(rows, p2p.backend)), ""]
    if judgement is not None:
        out += [f"Judgement: {judgement.summary()}", "", f"    {judgement.exclude_line}", ""]
    return "\n".join(out)


def _iters(p2p: ProbeResult) -> str:
    counts = {m.get("iters") for m in p2p.metrics if m.get("collective") == "pair_uni"}
    return str(counts.pop()) if len(counts) == 1 and None not in counts else "timed"


def _host_heatmap(rows: list, hosts: list[str]) -> str:
    from envmatrix.reporting.pairs_tables import heatmap_html

    index = {h: i for i, h in enumerate(hosts)}
    values = {(index[r.recv], index[r.send]): r.gbps for r in rows}
    notes = {(index[r.recv], index[r.send]): r.judged for r in rows}
    return heatmap_html("host pairs: GB/s (row receives from column)", hosts, values, notes)


def _write(run_dir: str, name: str, markdown: str, heatmaps: str) -> str:
    path = os.path.join(run_dir, f"{name}.md")
    with open(path, "w") as fh:
        fh.write(markdown + "\n")
    with open(os.path.join(run_dir, f"{name}.html"), "w") as fh:
        fh.write(f"<!doctype html><meta charset='utf-8'><title>{name}</title>\n{heatmaps}\n")
    return path
