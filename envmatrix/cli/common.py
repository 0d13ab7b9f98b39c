"""What the command modules share: the argparse set-up of a command and of its common flags, turning parsed
arguments into an app request, the console, plain progress lines and the closing report lines."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any, Optional, TypeVar

Request = TypeVar("Request")


def add_command(sub: argparse._SubParsersAction, name: str, summary: str, description: str,
                examples: Optional[str] = None, *, overrides: Optional[str] = None,
                out: Optional[str] = None) -> argparse.ArgumentParser:
    """One subcommand; ``main`` gives every one --debug, the exit codes and the raw help formatter.

    ``overrides``/``out``: the help of a config-reading command's Hydra overrides and run directory; such a
    command also gets --allow-unknown-vars."""
    p = sub.add_parser(name, help=summary, description=description, epilog=examples)
    if overrides is not None:
        p.add_argument("overrides", nargs="*", help=overrides)
        p.add_argument("--out", metavar="DIR", help=out)
        p.add_argument("--allow-unknown-vars", action="store_true", help="let site-specific variables outside the catalogs through")
    return p


def add_threshold_flags(p: argparse.ArgumentParser) -> None:
    """sweep and bench: a recorded run's figures as floors (the expect: block is config content)."""
    p.add_argument("--baseline", metavar="RUN_DIR", help="a recorded run: each of its busbw points (same setup, grid, "
                   "backend, collective, size) less --tolerance is a floor; below it the cell is slow (exit 1)")
    p.add_argument("--tolerance", metavar="PCT", help="with --baseline: allowed drop, e.g. 10%% (default), 2.5 or 0.05")


# --emulate-hosts is config content said as a flag: the local launcher's option, so it joins the run keys like any.
EMULATE_HOSTS_OVERRIDE = "++launcher_opts.local.emulate_hosts=true"


def add_emulate_hosts_flag(p: argparse.ArgumentParser) -> None:
    """``--emulate-hosts`` on the commands that launch ranks (sweep, bench, bisect, search)."""
    p.add_argument("--emulate-hosts", action="store_true",
                   help="ranks of a grid larger than the visible GPUs share them as emulated hosts (a NCCL_HOSTID and "
                        "a hostname emh0.. each; NET between hosts): pass/fail and transport as on a cluster, bandwidth "
                        "not representative (same as launcher_opts.local.emulate_hosts=true; launcher=local only)")


def check_one_emulate_hosts(overrides: Any) -> None:
    """--emulate-hosts is appended as an override, so it silently won over one that sets the same option
    (emulate_hosts=false, or {namespaces: true} turned into plain true): two answers to one question."""
    from envmatrix.errors import ConfigError

    key = EMULATE_HOSTS_OVERRIDE.lstrip("+").split("=", 1)[0]
    for item in overrides:
        name, _, value = str(item).lstrip("+~").partition("=")
        if name == key or name.startswith(f"{key}.") or name in ("launcher_opts", "launcher_opts.local") and "emulate_hosts" in value:
            raise ConfigError(f"--emulate-hosts: given with the override {item}, two answers to one question; allowed: "
                              f"one of them (--emulate-hosts is {key}=true)")


def request_from(cls: type[Request], args: argparse.Namespace, **given: Any) -> Request:
    """The request ``cls`` (a frozen dataclass of app/) from the parsed arguments of the same names; ``given``
    sets the fields named otherwise on the command line. Lists become tuples: a request is immutable."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    if getattr(args, "emulate_hosts", False) and "overrides" in values:
        check_one_emulate_hosts(values["overrides"])
        values["overrides"] = [*values["overrides"], EMULATE_HOSTS_OVERRIDE]
    values.update(given)
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def add_network_flag(p: argparse.ArgumentParser) -> None:
    """``--network`` on the measuring commands that take the network axis (sweep, bench): docs/network.md."""
    p.add_argument("--network", action="append", default=[], metavar="[NAME:]SPEC",
                   help="a network condition to run under, e.g. 'rate=1gbit', 'd5_b2:delay=5ms,rate=2gbit', 'default' "
                        "(unshaped); repeatable; replaces the config's network: axis (docs/network.md)")


def make_console():
    from rich.console import Console

    class PipeAwareConsole(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit 1 here; the reader going away (`| head`) is cli.main's 141, as for any writer
            self.quiet = True
            raise BrokenPipeError

    console = PipeAwareConsole()
    # Logs and pipes get wide tables instead of rich's 80-column fallback. COLUMNS is the shell's, not a user's
    # value to refuse: anything but a positive whole number is ignored, as rich ignores it.
    columns = os.environ.get("COLUMNS", "").strip()
    width = int(columns) if columns.isdigit() and int(columns) > 0 else 160
    return console if console.is_terminal else PipeAwareConsole(width=width)


def print_shaping_missed(console: Any, missed: Any) -> None:
    """Why a shaped run that passed exits 3 (app.network_axis.shaping_missed)."""
    if missed:
        cells = "1 cell" if len(missed) == 1 else f"{len(missed)} cells"
        console.print(f"inconclusive: shaping was not in effect in {cells} (first: {missed[0]}): the traffic did not "
                      "cross the shaped links (one node, loopback, another interface), so the figures are not the "
                      "condition's; measure on a grid of 2+ nodes", markup=False)


def print_outputs(console: Any, outputs: Any) -> None:
    """The closing lines of a measuring command (app.outputs.RunOutputs): JUnit when written, then report.html."""
    if outputs.junit:
        console.print(f"junit: {outputs.junit}", markup=False)
    if outputs.junit_error:
        console.print(f"junit not written ({outputs.junit_error}); the results are stored in {outputs.run_dir}", markup=False)
    if outputs.html_error:
        console.print(f"html report not written ({outputs.html_error}); retry with: envmatrix report {outputs.run_dir}",
                      markup=False)
    else:
        console.print(f"html report: {outputs.html}", markup=False)


class LineProgress:
    """Plain progress lines when stdout is not a terminal (CI logs, pipes)."""

    def __init__(self, console, command: str = "sweep") -> None:
        self.console, self.command = console, command

    def __call__(self, event, progress, result) -> None:
        if event == "start":
            runs = "run" if progress.total == 1 else "runs"
            from envmatrix.reporting.console import resume_hint

            self.console.print(f"{self.command}: {progress.total} {runs}, {resume_hint(progress)}", markup=False)
        elif result is not None:
            from envmatrix.reporting.console import clip_words, eta_suffix

            mark = "pass" if result.passed else clip_words(f"{result.outcome}: {result.root_cause.get('line') or ''}", 200)
            n = progress.done + progress.skipped
            self.console.print(f"[{n}/{progress.total}] ({result.setup_name}) {result.grid} {mark}{eta_suffix(progress)}",
                               markup=False, soft_wrap=True)  # one grep-able line per run in CI logs
