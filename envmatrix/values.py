"""The one validation layer: every value on its way to a parser comes through here.

A config file's YAML tree (before OmegaConf sees it), a command line's words for shlex, numbers for int/float,
sizes, durations, paths and names: each function takes the *key* the value came from (``probe.command``,
``--trials``, ``setups.a.NCCL_ALGO``, ``conf=``) and the value, and either returns the parsed value or raises one
ConfigError line naming both and what is allowed (exit 2, nothing written). Callers never catch a parser's own
exception (ValueError, IndexError, OmegaConf's errors) for a user's value: they call the function here instead.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import shlex
from typing import Any, Optional, Sequence

from envmatrix.errors import ConfigError

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_SECONDS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INTERPOLATION = re.compile(r"\$\{[^}]*\}?")
# A host name, IPv4 or IPv6 address as launchers pass it on (mpirun -H, srun -w, ssh): never a leading '-' (an option)
_HOST = re.compile(r"(?!-)[A-Za-z0-9_.:%\[\]-]{1,253}\Z")
_HOST_SLOTS = re.compile(r"[^:]+:\d+\Z")  # one colon, digits after it: an IPv6 address has two or more
_PLAIN = (str, int, float, bool, type(None))


def _fail(key: str, value: Any, problem: str, allowed: str) -> ConfigError:
    return ConfigError(f"{key}: {value!r} {problem}; allowed: {allowed}")


def integer(key: str, value: Any, minimum: Optional[int] = None, maximum: Optional[int] = None) -> int:
    """A whole number (an int, or text of one) within [minimum, maximum]."""
    allowed = _range("an integer", minimum, maximum)
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
        raise _fail(key, value, "is not an integer", allowed)
    try:
        number = int(str(value).strip()) if not isinstance(value, (int, float)) else int(value)
    except ValueError:
        raise _fail(key, value, "is not an integer", allowed) from None
    if minimum is not None and number < minimum or maximum is not None and number > maximum:
        raise _fail(key, value, "is out of range", allowed)
    return number


def number(key: str, value: Any, minimum: Optional[float] = None, above: Optional[float] = None,
           maximum: Optional[float] = None) -> float:
    """A finite number >= minimum, > above, <= maximum (each bound optional)."""
    if minimum is not None and maximum is not None and above is None:
        allowed = f"a number from {minimum:g} to {maximum:g}"
    else:
        allowed = "a number" + "".join(f" {op} {bound:g}" for op, bound in ((">=", minimum), (">", above), ("<=", maximum))
                                       if bound is not None)
    if isinstance(value, bool):
        raise _fail(key, value, "is not a number", allowed)
    try:
        parsed = float(value) if isinstance(value, (int, float)) else float(str(value).strip())
    except ValueError:
        raise _fail(key, value, "is not a number", allowed) from None
    if not math.isfinite(parsed):
        raise _fail(key, value, "is not a finite number", allowed)
    if (minimum is not None and parsed < minimum or above is not None and parsed <= above
            or maximum is not None and parsed > maximum):
        raise _fail(key, value, "is out of range", allowed)
    return parsed


def _range(what: str, minimum: Optional[int], maximum: Optional[int]) -> str:
    if minimum is not None and maximum is not None:
        return f"{what} from {minimum} to {maximum}"
    if minimum is not None:
        return f"{what} >= {minimum}"
    return f"{what} <= {maximum}" if maximum is not None else what


SEED_MAX = 2**32 - 1  # numpy's RandomState under Optuna's samplers takes seeds in [0, 2**32)


def seed(key: str, value: Any) -> int:
    """A random seed (config ``seed``, ``search.seed``): an integer every sampler takes."""
    return integer(key, value, 0, SEED_MAX)


def size(key: str, value: Any) -> int:
    """A positive byte count: 8, 64K, 256M, 1G (K = 1024)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = _SIZE.match(str(value)) if not isinstance(value, bool) else None
    if not match or int(match.group(1)) <= 0:
        raise _fail(key, value, "is not a size", "a positive byte count such as 8, 64K, 256M, 1G")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def duration(key: str, value: Any) -> float:
    """Seconds > 0: a number, or text such as 30, 30s, 500ms, 5m, 1h."""
    allowed = "a duration > 0 such as 30, 30s, 500ms, 5m or 1h"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value)) if not isinstance(value, bool) else None
        if not match:
            raise _fail(key, value, "is not a duration", allowed)
        seconds = float(match.group(1)) * _SECONDS[(match.group(2) or "").lower() or None]
    if not math.isfinite(seconds) or seconds <= 0:
        raise _fail(key, value, "is not a duration > 0", allowed)
    return seconds


def words(key: str, text: Any) -> list[str]:
    """A command line split as a POSIX shell would (shlex), never run through a shell."""
    if not isinstance(text, str):
        raise _fail(key, text, "is not a command line", "a command as one string, e.g. 'my_check -q', or a list of its words")
    try:
        argv = shlex.split(text)
    except ValueError as exc:  # shlex: "No closing quotation", "No escaped character"
        raise _fail(key, text, f"cannot be split into words ({str(exc).lower()})",
                    "balanced quotes, e.g. 'my_check -n \"a b\"'") from None
    if not argv:
        raise _fail(key, text, "is empty", "a command, e.g. 'my_check -q'")
    if "\x00" in text:  # as word_list refuses it: the launch raised 'embedded null byte', stored as the run's failure
        raise _fail(key, text, "contains a NUL byte", "text without NUL")
    return argv


def word_list(key: str, value: Any, example: str) -> list[str]:
    """Command-line words given as a list (probe.command, launcher_opts.<launcher>.extra_args): each text or a
    number; true/false, null, a list or a mapping in an argv would reach the program as 'True' or "['x']"."""
    if not isinstance(value, (list, tuple)):
        raise _fail(key, value, "is not a list of words", f"a list such as {example}")
    for i, word in enumerate(value):
        if isinstance(word, bool) or not isinstance(word, (str, int, float)):
            raise _fail(f"{key}[{i}]", word, "is not a command-line word", f"text or a number (a list such as {example})")
        if "\x00" in str(word):
            raise _fail(f"{key}[{i}]", word, "contains a NUL byte", "text without NUL")
    return [str(word) for word in value]


def argv(key: str, value: Any) -> list[str]:
    """A command: one string split as a shell would (``words``), or its words as a list."""
    if isinstance(value, (list, tuple)):
        command = word_list(key, value, "['my_check', '-q']")
        if not command:
            raise _fail(key, value, "is empty", "a command, e.g. 'my_check -q'")
        return command
    return words(key, value)


def var_name(key: str, name: Any) -> str:
    """An environment variable name a shell can export: letters, digits and _, not starting with a digit."""
    text = str(name) if isinstance(name, (str, int)) and not isinstance(name, bool) else None
    if text is None or not _VAR_NAME.match(text):
        problem = ("is empty" if text == "" else "contains '='" if text and "=" in text
                   else "is not a variable name")
        raise _fail(key, name, problem, "[A-Za-z_][A-Za-z0-9_]* (e.g. NCCL_ALGO)")
    return text


def path(key: str, value: Any, kind: str = "any") -> str:
    """An existing path: ``kind`` file, dir or any."""
    if not isinstance(value, str) or not value or "\x00" in value:
        raise _fail(key, value, "is not a path", f"an existing {'path' if kind == 'any' else kind}")
    checks = {"file": os.path.isfile, "dir": os.path.isdir, "any": os.path.exists}
    if not checks[kind](value):
        what = {"file": "a file", "dir": "a directory", "any": "there"}[kind]
        problem = f"is not {what}" if os.path.exists(value) else "does not exist"
        raise _fail(key, value, problem, f"an existing {'path' if kind == 'any' else kind}")
    return value


# What each kind of output file starts with: an existing file is written over only when it is one of its kind
_OUTPUT_KINDS = {"html": ("an HTML", (b"<!DOCTYPE html", b"<html")), "junit": ("a JUnit XML", (b"<?xml",)),
                 "json": ("a JSON", (b"[", b"{")), "script": ("a batch script", (b"#!",))}


def output_file(key: str, value: Any, kind: Optional[str] = None) -> str:
    """A file a command will write at its end: checked before anything runs, so a bad path costs no probes.
    Missing folders on the way are fine (the writer makes them); a directory, or a file on the way, is not.
    ``kind`` (html, junit, json, script): an existing file is replaced only when it is one of that kind, so
    ``report -o RUN/results.sqlite`` or ``submit --script my.yaml`` cannot write over a store or a config."""
    allowed = "a file path whose folders are directories (they are made when missing)"
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise _fail(key, value, "is not a path", allowed)
    if os.path.isdir(value):
        raise _fail(key, value, "is a directory", allowed)
    if kind is not None and os.path.isfile(value) and os.path.getsize(value) > 0:
        with open(value, "rb") as fh:
            head = fh.read(64).lstrip()
        label, starts = _OUTPUT_KINDS[kind]
        if not head.startswith(starts):
            raise _fail(key, value, f"already holds a file that is not {label} file (it starts {head[:16]!r})",
                        f"a new path, or {label} file to replace")
    parent = os.path.dirname(os.path.abspath(value))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise _fail(key, value, f"lies under {parent}, which is a file", allowed)
    if not os.access(parent, os.W_OK):
        raise _fail(key, value, f"cannot be written ({parent} is read-only)", allowed)
    if parent == os.path.dirname(os.path.abspath(value)) and not os.path.lexists(value):
        try:  # root passes os.access everywhere; /proc, /sys and read-only mounts refuse only a real create
            os.close(os.open(value, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            os.unlink(value)
        except OSError as exc:
            raise _fail(key, value, f"cannot be created ({exc.strerror})", allowed) from None
    return value


def host(key: str, value: Any) -> str:
    """One host name or address, as a launcher's command line takes it."""
    if not isinstance(value, str) or not _HOST.match(value):
        raise _fail(key, value, "is not a host name", "letters, digits and _ . : % [ ] - not starting with '-' (e.g. node01, "
                    "10.0.0.5, fe80::1)")
    if _HOST_SLOTS.match(value):  # mpirun got --host node0:2:1 and the ranks MASTER_ADDR=node0:2: a hang, not an error
        raise _fail(key, value, "is HOST:SLOTS, not a host", "the host alone (ranks per host come from the grid's ppn; "
                    "HOST:N belongs in a hostfile)")
    return value


def hosts(key: str, value: Any) -> tuple[str, ...]:
    """A list of distinct host names (config ``hosts:``, ``launcher_opts.<launcher>.hosts``)."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise _fail(key, value, "is not a list of hosts", "a list such as [node01, node02]")
    return tuple(distinct(key, [host(f"{key}[{i}]", item) for i, item in enumerate(value)], "each host once"))


def first_repeat(items: Sequence[Any]) -> Optional[tuple[int, int]]:
    """(index of the first item equal to an earlier one, index of that earlier one), or None: lists where a repeat
    would be dropped or run twice (hosts, grids) refuse it by this."""
    seen: dict[Any, int] = {}
    for i, item in enumerate(items):
        key = item if getattr(item, "__hash__", None) is not None else repr(item)  # a mapping in a list of names
        if key in seen:
            return i, seen[key]
        seen[key] = i
    return None


def distinct(key: str, items: Sequence[Any], allowed: str = "each item once") -> Sequence[Any]:
    """``items`` unchanged, or the first repeat refused as ``key[i]`` (a repeat would run twice or be dropped)."""
    repeat = first_repeat(items)
    if repeat is not None:
        raise _fail(f"{key}[{repeat[0]}]", items[repeat[0]], "is listed twice", allowed)
    return items


def choice(key: str, value: Any, allowed: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise _fail(key, value, "is not allowed", ", ".join(allowed))
    return value


def index(key: str, value: Any, items: Sequence[Any], what: str) -> int:
    """A position in ``items`` (0-based), named as ``what`` in the message."""
    if not items:
        raise _fail(key, value, f"names no {what}", f"a study with {what}s")
    return integer(key, value, 0, len(items) - 1)


_MAX_DEPTH = 32  # configs nest about 5 deep; OmegaConf runs out of Python's stack near 100


def plain_tree(where: str, data: Any, key: str = "", depth: int = 0) -> Any:
    """A parsed YAML tree as config data: only mappings with text keys, lists and plain scalars, and no ``${...}``
    interpolation (configs take values as written). YAML's own types (a date such as 2024-01-01, a timestamp,
    binary) are refused with the key, so a value never turns into something else on its way to OmegaConf."""
    here = f"{where}: {key}" if key else where
    if depth > _MAX_DEPTH and isinstance(data, (dict, list)):
        raise _fail(here, type(data).__name__, f"nests deeper than {_MAX_DEPTH} levels",
                    f"at most {_MAX_DEPTH} levels of mappings and lists")
    if isinstance(data, dict):
        for k, v in data.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise _fail(here, k, "is not a key", "text keys")
            plain_tree(where, v, f"{key}.{k}" if key else str(k), depth + 1)
        return data
    if isinstance(data, list):
        for i, v in enumerate(data):
            plain_tree(where, v, f"{key}[{i}]", depth + 1)
        return data
    if isinstance(data, (datetime.date, datetime.datetime)):
        raise _fail(here, str(data), "parses as a date", f"quote it to keep it text ({key}: '{data}')")
    if not isinstance(data, _PLAIN):
        raise _fail(here, data, f"is a {type(data).__name__}", "text, a number, true/false or null")
    if isinstance(data, str):
        interpolation(here, data)
    return data


def interpolation(key: str, value: str) -> str:
    """Refuse ``${...}`` (OmegaConf interpolation, or a shell variable a config cannot expand)."""
    match = _INTERPOLATION.search(value)
    if match:
        raise _fail(key, value, f"holds {match.group(0)}, which configs do not expand",
                    "the value itself (write the path or text, not a variable)")
    return value


MAX_TEXT_BYTES = 64 << 20


def read_utf8(path: str | os.PathLike, label: str, what: str = "it") -> str:
    """A user-given file's text; non-UTF-8 bytes and unreadable files are one-line ConfigErrors naming ``label``.
    At most MAX_TEXT_BYTES are read: /dev/zero (or a pipe that never ends) was read until memory ran out, while a
    pipe that ends (--env-file <(env | grep NCCL)) is read as a file. Configs, env files, version lists and host
    files (bisect --hosts, launcher_opts.<launcher>.hostfile) are all read with it."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_TEXT_BYTES + 1)
        if len(data) > MAX_TEXT_BYTES:
            raise ConfigError(f"{label}: more than {MAX_TEXT_BYTES >> 20} MiB; allowed: a text file of at most "
                              f"{MAX_TEXT_BYTES >> 20} MiB (configs, env files and host lists are kilobytes)")
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{label}: not UTF-8 text (byte {exc.start}); save {what} as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read ({exc.strerror})") from None
