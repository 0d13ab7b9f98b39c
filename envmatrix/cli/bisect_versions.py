"""``envmatrix bisect --versions``: git-bisect over NCCL library or plugin builds."""

from __future__ import annotations

import json
import os
from typing import Any

from envmatrix.errors import ConfigError


def run_version_bisect(args: Any, inp: Any, gpus: list, pins: dict, probe: Any, run_dir: str, console: Any) -> int:
    from envmatrix.bisect.driver import ProbeContext, run_env
    from envmatrix.bisect.versions import bisect_versions, parse_versions_file, version_atoms
    from envmatrix.planning.grid import parse_grid
    from envmatrix.engine import open_session

    if args.versions_file:
        try:
            versions = parse_versions_file(open(args.versions_file).read(), where=args.versions_file)
        except OSError as exc:
            raise ConfigError(f"--versions-file {args.versions_file}: cannot read ({exc.strerror})") from None
    else:
        versions = list(args.versions)
    if len(versions) < 2:
        raise ConfigError("--versions: give at least two paths (a good one first, a bad one last)")
    for v in versions:
        version_atoms(v, args.version_mode)  # validates every path before anything runs
    missing = [v for v in versions if not os.path.exists(v)]
    if missing and inp.launcher == "local":
        raise ConfigError(f"--versions {missing[0]}: no such file or directory; give NCCL builds that exist here "
                          "(a lib directory or a libnccl.so file per version)")
    grid = parse_grid(args.grid, "--grid") if args.grid else inp.grids[0]
    with open_session(inp, run_dir, pins, len(gpus), probe_spec=probe, sweep_id=f"bisect-versions-{grid.label}", pool=True) as session:
        ctx = ProbeContext(session, grid, args.rerun)

        def test(version: str) -> str:
            result, _ = run_env(ctx, f"version-{os.path.basename(version.rstrip('/'))}", list(version_atoms(version, args.version_mode)))
            console.print(f"[versions {grid.label}] {version}: {'pass' if result.passed else result.outcome}", markup=False)
            if result.passed:
                return "good"
            return "skip" if result.outcome in ("unresolved", "launch_error") else "bad"

        result = bisect_versions(versions, test)
    console.print(result.message, markup=False)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result.to_json(), fh, indent=1)
    return result.exit_code
