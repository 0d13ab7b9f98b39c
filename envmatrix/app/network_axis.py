"""The network axis of a command: its conditions (config ``network:`` or ``--network``), where they are applied,
and the checks that refuse a condition before anything launches.

Where the links are, decided once per command from the launcher's hosts:
- an emulated cluster (mpirun through an ``envmatrix cluster`` agent, no ``network_options.interface``): each
  used host's eth0, shaped from this process (engine.network.link_shaper); checked here with
  ``shaping.check_applicable`` on every host link before the first run;
- a cluster launcher with ``network_options.interface`` (real hosts; an emulated cluster's too, which mpirun
  cannot tell from real ones): one ``python -m envmatrix.network.host hold`` per node, started by the launcher
  before each shaped run (engine.network.launcher_shaper); a preflight hold per condition on every host (files in
  a scratch directory under the working directory, removed after) refuses what a host cannot apply before the
  run directory is made;
- the local launcher's per-host namespaces (``emulate_hosts: {namespaces: true}``): each used host's eth0, shaped
  from this process once the session has made them (engine.network.seat_links); root and the kernel's qdiscs are
  checked before anything runs;
- anything else (every rank on this host): a shaped condition is refused, since its traffic never leaves loopback.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from envmatrix.config.resolve import SweepInput
from envmatrix.errors import ConfigError, PlanError


def with_flags(inp: SweepInput, flags: Sequence[str]) -> SweepInput:
    """``--network`` flags replace the config's axis (the config's network_options still apply)."""
    if not flags:
        return inp
    from envmatrix.config.network import NetworkOptions, network_axis, parse_flags

    options = inp.network_options or NetworkOptions()
    return dataclasses.replace(inp, conditions=network_axis(parse_flags(flags), options, "--network"))


def shaped_conditions(inp: SweepInput) -> list[Any]:
    return [c for c in inp.conditions if c.shaped]


@dataclass(frozen=True)
class ShapingPlan:
    """How this command's runs reach their links; ``shaper(session)`` is the engine's Shaper."""

    how: str  # "links" | "launcher"
    shaper: Callable[[Any], Any]
    where: str  # for messages: "emulated cluster c1 (node0-node3)" / "hosts a,b via mpirun on eth1"


@dataclass(frozen=True)
class _Launching:
    """What engine.network.launcher_shaper reads of a session, before there is one (the preflight)."""

    launcher: Any
    environ: Any
    pins: Any
    gpus: int


def _emulated_cluster(inp: SweepInput) -> Any:
    """The live emulated cluster whose agent this mpirun uses, or None."""
    if inp.launcher != "mpirun":
        return None
    extra = [str(a) for a in (inp.launcher_opts or {}).get("extra_args") or []]
    from envmatrix import cluster

    for c in cluster.clusters():
        if str(c.agent) in extra:
            return c
    return None


def check_payload_fits_timeout(inp: SweepInput, conditions: Sequence[Any]) -> None:
    """A rate too low for the probe's own payload to cross within its timeout is refused before anything runs: the
    run would only time out (measured: rate=1kbit, nothing but a timeout after the probe's whole deadline), and the
    failure would read as the setup's. The least time is the physics floor of every bench size and collective,
    warm-up and iterations included, on each grid; without a bench, of the plain probe's collectives of
    ``probe.numel`` float32 elements (a command or MPI probe's payload is its own and is not checked)."""
    from envmatrix.judgement.physics import floor_s, hosts_crossing

    params = inp.probe.params
    bench = params.get("bench") or {}
    timeout_s = params.get("timeout_s")
    if bench.get("sizes"):
        sizes, collectives = bench["sizes"], bench.get("collectives") or []
        rounds = int(bench.get("iters") or 1) + int(bench.get("warmup") or 0)
        what, smaller = f"the bench (S/R of every size and collective, {rounds} rounds)", \
            "smaller sizes (-e / max_bytes), fewer iterations (-n, -w)"
    elif params.get("numel") and params.get("collectives"):  # the plain probe: each collective once, float32
        sizes, collectives, rounds = [int(params["numel"]) * 4], params["collectives"], 1
        what, smaller = f"the probe's check (S/R of {sizes[0]} B of each collective)", "a smaller probe.numel"
    else:
        return
    if not timeout_s:
        return
    for condition in (c for c in conditions if c.rate_bps is not None):
        for grid in inp.grids:
            hosts = hosts_crossing(grid.label)
            least_s = rounds * sum(floor_s(pattern, size, hosts, condition.rate_bps) or 0.0
                                   for pattern in collectives for size in sizes)
            if least_s > float(timeout_s):
                raise ConfigError(
                    f"network {condition.name} ({condition.describe()}): {what} on {grid.label} needs at least "
                    f"{least_s:.0f} s at this rate but the probe's timeout is {float(timeout_s):g} s; allowed: a "
                    f"faster rate, {smaller} or a longer timeout (--timeout / probe.timeout_s)")


def plan_shaping(inp: SweepInput, launcher: Any, pins: Any = None, gpus: int = 0) -> Optional[ShapingPlan]:
    """None without a shaped condition; else how to shape, after the checks that can run before any launch
    (``pins`` and ``gpus``: what the preflight hold on real hosts is launched with)."""
    conditions = shaped_conditions(inp)
    if not conditions:
        return None
    from envmatrix.config.network import NetworkOptions
    from envmatrix.engine.network import check_links, launcher_shaper, link_shaper, seat_links

    options = inp.network_options or NetworkOptions()
    check_payload_fits_timeout(inp, conditions)
    hosts = list(launcher.node_hosts(os.environ))
    names = ", ".join(c.name for c in conditions)
    if not hosts and launcher.host_namespaces:  # the session makes a namespace per host: their links, once they exist
        check_links([], conditions, options.allow_default_route)  # root and the kernel's qdiscs, before anything runs
        return ShapingPlan("links", lambda session: link_shaper(seat_links(session), options.allow_default_route),
                           "this session's emulated hosts (a network namespace each), eth0 each")
    if not hosts:
        raise PlanError(f"network {names}: every rank of launcher {inp.launcher} runs on this host, so its traffic "
                        "never crosses a link to shape; allowed: an emulated cluster (envmatrix cluster up N, then "
                        "its conf lines), launcher_opts.local.emulate_hosts: {namespaces: true} (as root), or a "
                        "cluster launcher (mpirun/srun hosts) with network_options.interface")
    emulated = _emulated_cluster(inp)
    interface = options.interface or next((c.interface for c in conditions if c.interface), None)
    if emulated is not None and interface is None:
        by_name = {**{h: h for h in emulated.hosts}, **{a: h for h, a in emulated.addresses.items()}}
        unknown = [h for h in hosts if h not in by_name]
        if unknown:
            raise PlanError(f"network {names}: host {unknown[0]!r} is not a host of emulated cluster "
                            f"{emulated.name} ({', '.join(emulated.hosts)})")
        used = [by_name[h] for h in hosts]

        def links_of_nodes(nodes: int) -> list[Any]:
            return [emulated.host_link(h) for h in used[:nodes]]

        grids = max((g.nodes for g in inp.grids), default=1)
        check_links(links_of_nodes(grids), conditions, options.allow_default_route)
        return ShapingPlan("links", lambda session: link_shaper(links_of_nodes, options.allow_default_route),
                           f"emulated cluster {emulated.name} ({', '.join(used)}), eth0 each")
    if interface is None:
        raise PlanError(f"network {names}: on real hosts ({', '.join(hosts)}) say which interface to shape; allowed: "
                        "network_options.interface=<the NIC the ranks use, e.g. eth1> (never the default-route "
                        "interface unless network_options.allow_default_route=true)")

    preflight(inp, _Launching(launcher, dict(os.environ), dict(pins or {}), gpus), conditions, interface,
              options.allow_default_route)
    return ShapingPlan("launcher", lambda session: launcher_shaper(session, interface, options.allow_default_route),
                       f"hosts {', '.join(hosts)} via {inp.launcher}, {interface} each")


def preflight(inp: SweepInput, launching: _Launching, conditions: Sequence[Any], interface: str,
              allow_default_route: bool) -> None:
    """Each shaped condition held once on every host the largest grid uses and let go: a host that cannot apply
    it (not root, no sch_netem, the default-route interface, no such interface) refuses in one line (PlanError)."""
    import shutil
    import tempfile

    from envmatrix.engine.network import launcher_shaper
    from envmatrix.env.atoms import Setup
    from envmatrix.planning.grid import Grid
    from envmatrix.planning.plan import Run

    nodes = max(g.nodes for g in inp.grids)
    scratch = tempfile.mkdtemp(prefix=".envmatrix-network-preflight-", dir=os.getcwd())  # shared, like run dirs
    try:
        for condition in conditions:
            run = Run("preflight", Setup("network-preflight"), Grid(nodes, 1), inp.probe, inp.backend,
                      inp.launcher_key, condition)
            with launcher_shaper(launching, interface, allow_default_route)(run, os.path.join(scratch, condition.name)):
                pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def shaping_session(session: Any, plan: Optional[ShapingPlan]) -> Any:
    """The session its runs shape through (one run at a time: two runs shaping the same links would mix)."""
    if plan is None:
        return session
    return session.under(shaper=plan.shaper(session), jobs=1)


def write_condition_tables(run_dir: str, results: Sequence[Any], title: str = "Network conditions") -> list[str]:
    """RUN_DIR/conditions.md (seed 000's and 001's tables) and conditions.csv (one line per cell)."""
    from envmatrix.reporting.conditions_tables import conditions_csv, conditions_markdown

    paths = []
    for name, text in (("conditions.md", conditions_markdown(results, title)), ("conditions.csv", conditions_csv(results))):
        path = os.path.join(run_dir, name)
        with open(path, "w") as fh:
            fh.write(text)
        paths.append(path)
    return paths


def shaping_missed(results: Sequence[Any]) -> list[str]:
    """The bench cells of any pattern whose condition's rate was not in effect (judgement.physics: far under the
    rate's floor and the traffic did not cross the shaped links), one phrase each: their figures are not their
    condition's, so the run is inconclusive. A delay or loss alone puts no floor under a time: never judged so."""
    from envmatrix.bench.formulas import ALL
    from envmatrix.bench.sizes import format_size
    from envmatrix.judgement.physics import NOT_IN_EFFECT
    from envmatrix.reporting.conditions_tables import condition_cells

    return [f"{c.pattern} {format_size(c.size_bytes)} on {c.grid} under {c.condition} ({c.value})"
            for c in condition_cells(results, tuple(ALL)) if c.check.verdict == NOT_IN_EFFECT]


def with_shaping_missed(code: int, missed: Sequence[str]) -> int:
    """A run that passed is inconclusive (exit 3) where a condition it measured was not in effect; failures stay 1."""
    from envmatrix.errors import EXIT_INCONCLUSIVE, EXIT_OK

    return EXIT_INCONCLUSIVE if code == EXIT_OK and missed else code
