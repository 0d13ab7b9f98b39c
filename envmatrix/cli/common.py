"""What several commands share: the console, config preparation, plain progress lines."""

from __future__ import annotations

import argparse
import os


def prepare(args: argparse.Namespace, baseline_run: str | None = None, tolerance: str | None = None):
    """The resolved sweep input of ``args.overrides``, this host's GPUs and the caller's safety pins; with
    ``baseline_run`` (a ``--baseline RUN_DIR`` of a command that judges slow) its floors join the expectations."""
    from envmatrix.config import compose_config
    from envmatrix.config.resolve import resolve
    from envmatrix.env.merge import caller_pins
    from envmatrix.execution.hostinfo import gpu_inventory

    gpus = gpu_inventory()
    pins = caller_pins()
    cfg, conf_file = compose_config(args.overrides)
    inp = resolve(cfg, conf_file, len(gpus), pins, allow_unknown=args.allow_unknown_vars)
    if tolerance is not None and not baseline_run:
        from envmatrix.errors import ConfigError

        raise ConfigError(f"--tolerance {tolerance}: only with --baseline RUN_DIR; allowed: --baseline RUN_DIR --tolerance 10%")
    if baseline_run:
        import dataclasses

        from envmatrix.reporting.thresholds import load_baseline

        floors = load_baseline(baseline_run, "10%" if tolerance is None else tolerance)
        inp = dataclasses.replace(inp, expectations=inp.expectations + floors)
    return inp, gpus, pins


def add_threshold_flags(p: argparse.ArgumentParser) -> None:
    """sweep and bench: a recorded run's figures as floors (the expect: block is config content)."""
    p.add_argument("--baseline", metavar="RUN_DIR", help="a recorded run: each of its busbw points (same setup, grid, "
                   "backend, collective, size) less --tolerance is a floor; below it the cell is slow (exit 1)")
    p.add_argument("--tolerance", metavar="PCT", help="with --baseline: allowed drop, e.g. 10%% (default), 2.5 or 0.05")


def make_console():
    from rich.console import Console

    console = Console()
    # Logs and pipes get wide tables instead of rich's 80-column fallback.
    return console if console.is_terminal else Console(width=int(os.environ.get("COLUMNS", 160)))


class LineProgress:
    """Plain progress lines when stdout is not a terminal (CI logs, pipes)."""

    def __init__(self, console, command: str = "sweep") -> None:
        self.console, self.command = console, command

    def __call__(self, event, progress, result) -> None:
        if event == "start":
            runs = "run" if progress.total == 1 else "runs"
            self.console.print(f"{self.command}: {progress.total} {runs}, {progress.skipped} already in the store")
        elif result is not None:
            from envmatrix.reporting.console import clip_words, eta_suffix

            mark = "pass" if result.passed else clip_words(f"{result.outcome}: {result.root_cause.get('line') or ''}", 200)
            n = progress.done + progress.skipped
            self.console.print(f"[{n}/{progress.total}] ({result.setup_name}) {result.grid} {mark}{eta_suffix(progress)}",
                               markup=False, soft_wrap=True)  # one grep-able line per run in CI logs
