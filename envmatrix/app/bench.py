"""A bench: one setup on one grid, turned into a one-run sweep input (app.sweep runs it)."""

from __future__ import annotations

import dataclasses
from typing import Any

from envmatrix.config.resolve import SweepInput, check_grids_fit, check_pins
from envmatrix.env.atoms import Setup, atoms_from_mapping
from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.planning.grid import auto_grids, parse_grid
from envmatrix.probes import get_probe


def parse_env_flags(items: list[str]) -> dict[str, str]:
    env = {}
    for item in items:
        if "=" not in item or not item.split("=", 1)[0]:
            raise ConfigError(f"--env {item!r}: not KEY=VALUE; allowed: e.g. --env NCCL_ALGO=Ring")
        key, value = item.split("=", 1)
        env[key] = value
    return env


def prepare_bench(inp: SweepInput, args: Any, gpus: int) -> SweepInput:
    from envmatrix.catalog import load_catalog
    from envmatrix.env.merge import caller_pins

    if args.setup is not None:
        named = {s.name: s for s in inp.setups}
        if args.setup not in named:
            raise ConfigError(f"--setup {args.setup!r}: not in {inp.conf_file.name}{did_you_mean(args.setup, named)}; allowed: {', '.join(named)}")
        base = named[args.setup]
    else:
        base = Setup("env")
    extra = atoms_from_mapping(parse_env_flags(args.env), "--env")
    atoms = tuple(a for a in base.atoms if a.var not in {e.var for e in extra}) + extra
    setup = Setup(base.name if not extra else f"{base.name}+env", atoms)
    load_catalog().validate_setup(setup, where="bench", allow_unknown=args.allow_unknown_vars)
    check_pins([setup], caller_pins(), "bench")
    grid = parse_grid(args.grid, "--grid") if args.grid else (inp.grids[0] if inp.grids else auto_grids(gpus)[0])
    check_grids_fit([grid], inp.backend, gpus, int(inp.config.get("max_local_ranks", 16)), inp.make_launcher())
    bench = {
        "collectives": [c.strip() for c in args.collectives.split(",") if c.strip()],
        "min_bytes": args.min_bytes,
        "max_bytes": args.max_bytes,
        "factor": args.factor,
        "step_bytes": args.step_bytes,
        "iters": args.iters,
        "warmup": args.warmup,
        "dtype": args.dtype,
        "check": not args.no_check,
        "timing": args.timing,
    }
    probe = get_probe("builtin").spec({"bench": bench, "timeout_s": args.timeout, "collectives": ["allreduce"]}, "bench", inp.backend)
    return dataclasses.replace(inp, name="bench", grids=(grid,), setups=(setup,), probe=probe)
