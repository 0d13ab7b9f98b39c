"""The command line: ``envmatrix COMMAND [flags] [hydra overrides]``; ``main`` and the command registry.

Each command is one module of this package with ``add_parser(sub)`` (its flags, ``set_defaults(func=...)``):
``func`` turns the parsed flags into the command's request, calls its lifecycle in ``envmatrix.app.<command>``
and renders the result (console lines, exit code); no command module imports the engine or the store.
Errors are one line, with the exit codes below; ``--debug`` shows the traceback. Nothing outside this
package imports it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import sys
import traceback
from typing import Optional, Sequence

from envmatrix import interrupts
from envmatrix.errors import EXIT_INTERRUPTED, EnvmatrixError

EXIT_CODES = """exit codes (the same for sweep, bench, bisect, search, diff):
  0    all passed / nothing to do
  1    failures found: cells failed, culprits named, regressions
  2    usage or bad input: nothing launched or written
  3    inconclusive: flaky, probe budget spent, unresolved, a shaped rate not in effect, a partial diff
  130  interrupted (Ctrl-C, SIGTERM as scancel sends, SIGHUP); completed results stay in the store
  141  the reader of the output went away (e.g. `| head`): 128 + SIGPIPE, as for any writer
"""
EXIT_PIPE_CLOSED = 141


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: a mistyped word gets the mistake and where help is, not the whole usage."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {one_line(message)}; see {self.prog} --help\n")


def one_line(message: str) -> str:
    """An error as the one line every command promises: a value that held a line break (a pasted path, a stray word)
    is shown with it escaped, as repr would, instead of splitting the message."""
    return message.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\r")


# The registry: one module per command, in the order `envmatrix --help` lists them.
COMMANDS = ("sweep", "bench", "bisect", "search", "export", "submit", "report", "diff", "configs", "network",
            "cluster")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="envmatrix", description="NCCL environment-configuration fuzzer and regression bisector.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").add_parser(sub)
    for p in sub.choices.values():
        # Global flags work after the subcommand too; SUPPRESS keeps a top-level --debug from being reset.
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
        p.epilog = f"{p.epilog.rstrip()}\n\n{EXIT_CODES}" if p.epilog else EXIT_CODES
        p.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXIT_CODES
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.set_defaults(command_parsers=sub.choices)
    return parser


STORE_COMMANDS = ("sweep", "bench", "bisect", "search")  # an interrupted one resumes from its store


def main(argv: Optional[Sequence[str]] = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    handlers, hook = interrupts.current(), sys.unraisablehook
    try:
        return _main(argv, words)
    except KeyboardInterrupt:
        # a Ctrl-C whose handler ran on _main's first or last lines, outside its own try (installing the handler, or
        # its finally before the handler is put back; CI run 88): the same answer, not a traceback and a death by
        # SIGINT. That finally may not have run: what it puts back is put back here.
        interrupts.restore(handlers)
        sys.unraisablehook = hook
        return _answer_interrupt(words)


def _main(argv: Optional[Sequence[str]], words: list[str]) -> int:
    # First: a Ctrl-C (or SIGTERM, SIGHUP) while the parser is built (every command module imported: a few hundred
    # ms) is an interruption like any other, not a KeyboardInterrupt traceback.
    previous = interrupts.install(_first_interrupt)
    previous_hook, sys.unraisablehook = sys.unraisablehook, _unraisable
    try:
        return _run(argv, words)
    except EnvmatrixError as exc:
        if "--debug" in words:
            traceback.print_exc()
        if interrupts.noted_signal() is not None:
            # The Ctrl-C became this error on its way out: a library caught its KeyboardInterrupt, or it was dropped
            # in a finalizer and left Hydra's state half-made ('c.yaml: defaults: a value of the wrong kind', exit 2,
            # 1 in 80 Ctrl-Cs under load): an interruption, not the user's bad input.
            return _answer_interrupt(words)
        print(f"envmatrix: error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return _answer_interrupt(words)
    except BrokenPipeError:
        # `envmatrix ... | head`: the reader is gone; what is left to print goes nowhere (Python would otherwise
        # fail again flushing stdout at exit, with a traceback)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE_CLOSED
    except Exception as exc:
        # Python 3.11 wraps a KeyboardInterrupt raised in a descriptor's __set_name__ (a dataclass field, while a
        # command module is imported) in a RuntimeError: a Ctrl-C all the same (CI run 89: a traceback, exit 1)
        if not _raised_by_interrupt(exc) and interrupts.noted_signal() is None:
            raise
        return _answer_interrupt(words)
    finally:
        interrupts.restore(previous)
        sys.unraisablehook = previous_hook
        interrupts.clear()


def _raised_by_interrupt(exc: BaseException) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _answer_interrupt(words: Sequence[str]) -> int:
    why = interrupts.noted_signal()
    interrupts.clear()
    # --rerun would measure everything again; resuming means the same command without it.
    resume = shlex.join(["envmatrix", *(w for w in words if w != "--rerun")])
    what = "interrupted" if why in (None, "SIGINT") else f"stopped by {why}"
    if next((w for w in words if not w.startswith("-")), None) in STORE_COMMANDS:
        print(f"envmatrix: {what}; finished runs are in the store, resume with: {resume}", file=sys.stderr)
    else:  # cluster up, network reset, report...: no store, nothing to resume (cluster up undid its hosts)
        print(f"envmatrix: {what}", file=sys.stderr)
    return EXIT_INTERRUPTED


def _run(argv: Optional[Sequence[str]], words: list[str]) -> int:
    check_utf8(words)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # Overrides may sit on both sides of flags (argparse takes one block of positionals). A word that is not an option
    # goes to the overrides too (~KEY, or a stray word compose names as 'not KEY=VALUE'), wherever it stands.
    stray = [item for item in extra if item.startswith("-") or not hasattr(args, "overrides")]
    if stray:  # the command's own parser, so the line points at `envmatrix CMD --help`
        args.command_parsers[args.command].error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    args.command_line = shlex.join(["envmatrix", *words])
    if args.command != "network":  # `network reset` lists what it removes itself
        _remove_network_leftovers()
    return args.func(args)


def check_utf8(words: Sequence[str]) -> None:
    """Every word as UTF-8 text: Python hands bytes that are not (a Latin-1 shell, a pasted path) over as lone
    surrogates, which passed as far as the first file or rank env written with them: a traceback mid-run, after the
    run directory existed (--out with byte 0xff in it, --env X= with one)."""
    from envmatrix.errors import ConfigError

    for word in words:
        try:
            word.encode("utf-8")
        except UnicodeEncodeError as exc:
            raw = word.encode("utf-8", "surrogateescape")
            byte = ord(word[exc.start]) - 0xDC00 if "\udc80" <= word[exc.start] <= "\udcff" else None
            what = f"byte {byte:#04x}" if byte is not None else f"{word[exc.start]!r}"
            raise ConfigError(f"argument {one_line(str(raw)[1:])}: not UTF-8 text ({what} at character {exc.start}); "
                              "allowed: UTF-8 text (paths, values and names go into UTF-8 reports and rank "
                              "environments)") from None


def _remove_network_leftovers() -> None:
    # Qdiscs a killed run left installed go before anything else runs (one line says what went).
    from envmatrix.app.network import remove_leftovers

    remove_leftovers(lambda line: print(line, file=sys.stderr))


def _first_interrupt(signum, frame):
    # The unwinding that follows kills the ranks' process groups; if it hangs, a second Ctrl-C
    # leaves at once (ranks die with us through PR_SET_PDEATHSIG, the store is transactional).
    # Noted first: raised inside a finalizer, the KeyboardInterrupt below is dropped by CPython, and the run
    # loops raise it again from the note (envmatrix.interrupts).
    interrupts.note(signum)
    interrupts.install(_second_interrupt)
    raise KeyboardInterrupt


def _unraisable(unraisable) -> None:
    # The Ctrl-C a finalizer swallowed is noted and raised again by the run loops: not a traceback to show.
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        return
    sys.__unraisablehook__(unraisable)


def _second_interrupt(signum, frame):
    os.write(2, b"envmatrix: interrupted again; leaving now\n")
    os._exit(EXIT_INTERRUPTED)
