"""``envmatrix bisect --versions``' lifecycle: git-bisect over NCCL library or plugin builds."""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from typing import Any

from envmatrix import paths as em_paths
from envmatrix.app.outputs import RunOutputs, write_run_outputs
from envmatrix.app.report import stored_cells
from envmatrix.errors import ConfigError


@dataclass(frozen=True)
class VersionBisectResult:
    verdict: Any  # bisect.versions' result: message, first bad version, exit code
    outputs: RunOutputs
    exit_code: int


def bisect_versions(request: Any, given: Any, events: Any) -> VersionBisectResult:
    """``request``/``given``/``events``: app.bisect's BisectRequest, BisectInput and BisectEvents."""
    from envmatrix.bisect.driver import ProbeContext, run_env
    from envmatrix.bisect.versions import bisect_versions as bisect_builds, parse_versions_file, version_atoms
    from envmatrix.engine import open_session
    from envmatrix.planning.grid import parse_grid

    (inp, gpus, pins, _), run_dir = given.prepared, given.run_dir
    if request.versions_file:
        from pathlib import Path

        from envmatrix.config.compose import read_utf8

        text = read_utf8(Path(request.versions_file), f"--versions-file {request.versions_file}")
        versions = parse_versions_file(text, where=request.versions_file)
    else:
        versions = list(request.versions)
    if len(versions) < 2:
        raise ConfigError("--versions: give at least two paths (a good one first, a bad one last)")
    for v in versions:
        version_atoms(v, request.version_mode or "auto")  # validates every path before anything runs
    missing = [v for v in versions if not os.path.exists(v)]
    if missing and inp.launcher == "local":
        raise ConfigError(f"--versions {missing[0]}: no such file or directory; give NCCL builds that exist here "
                          "(a lib directory or a libnccl.so file per version)")
    empty = [v for v in versions if os.path.isdir(v) and not glob.glob(os.path.join(v, "libnccl*.so*"))]
    if empty:
        raise ConfigError(f"--versions {empty[0]}: no libnccl*.so* in this directory, so it is not a build; allowed: "
                          "a lib directory holding libnccl.so (or a plugin's libnccl-net*.so), or the library file")
    if inp.backend == "gloo" and given.probe.name != "command":
        raise ConfigError(f"--versions: backend=gloo never loads NCCL, so every version would pass alike; allowed: "
                          "backend=nccl, or --probe-cmd CMD with a command that loads NCCL itself (e.g. all_reduce_perf)")
    grid = parse_grid(request.grid, "--grid") if request.grid else inp.grids[0]
    with open_session(inp, run_dir, pins, len(gpus), probe_spec=given.probe, sweep_id=f"bisect-versions-{grid.label}",
                      pool=True, lock_for=request.command_line) as session:
        ctx = ProbeContext(session, grid, request.rerun)

        def test(version: str) -> str:
            result, _ = run_env(ctx, f"version-{os.path.basename(version.rstrip('/'))}",
                                list(version_atoms(version, request.version_mode or "auto")))
            events.version(grid.label, version, result)
            if result.passed:
                return "good"
            return "skip" if result.outcome in ("unresolved", "launch_error") else "bad"

        verdict = bisect_builds(versions, test)
        stored = stored_cells(session.store)
    if request.json:
        em_paths.make_parent(request.json)
        with open(request.json, "w") as fh:
            json.dump(verdict.to_json(), fh, indent=1)
    return VersionBisectResult(verdict, write_run_outputs(run_dir, stored=stored), verdict.exit_code)
