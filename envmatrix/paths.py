"""Where envmatrix finds its packaged data and puts its outputs: the one place that knows.

Packaged data (configs, catalogs, batch templates) is found through
importlib.resources, so a wheel installed anywhere works from any cwd. In a
source checkout the repo's top-level conf/, search_spaces/ and launchers/ are
the visible source and win; the wheel carries copies of them under
``envmatrix/_bundled/`` (setup.py's build step).
"""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path

from envmatrix.errors import ConfigError

DATA_DIRS = ("conf", "search_spaces", "launchers")
RUNS_DIR = os.path.join("reports", "runs")
STORE_FILE = "results.sqlite"
MAX_NAME_LEN = 100
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+=,@-]*$")


def _package_root() -> Path:
    return Path(str(resources.files("envmatrix")))


def _checkout_root() -> Path | None:
    """The source checkout holding this package, when it is one (pyproject.toml next to it)."""
    root = _package_root().parent
    return root if (root / "pyproject.toml").is_file() and (root / "conf").is_dir() else None


def data_dir(kind: str) -> Path:
    """conf, search_spaces or launchers: the checkout's folder, else the wheel's bundled copy."""
    if kind not in DATA_DIRS:
        raise ValueError(f"unknown data dir {kind!r}; allowed: {', '.join(DATA_DIRS)}")
    checkout = _checkout_root()
    if checkout is not None:
        return checkout / kind
    return _package_root() / "_bundled" / kind


def conf_dir() -> Path:
    return data_dir("conf")


def search_spaces_dir() -> Path:
    return data_dir("search_spaces")


def templates_dir() -> Path:
    return data_dir("launchers")


def file_safe(name: str) -> str:
    """``name`` as part of a file name: characters other than letters, digits and ``-_.`` become ``_``, at most 40."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40]


def check_name(value: object, what: str, strict: bool = True) -> str:
    """A name that becomes a path component: no separators, no '..', no leading dot or dash, bounded.

    ``strict`` also limits the characters (run and study names); setup names keep theirs, since log
    folders slugify them.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int)):  # YAML true, 1.5, [a]: not a name's text
        raise ConfigError(f"{what}: {value!r} is not a name; allowed: text of letters, digits and _ . + = , @ - "
                          f"(quote it if YAML reads it as another type)")
    text = str(value)
    problem = None
    if not text:
        problem = "is empty"
    elif "\x00" in text:
        problem = "contains a NUL byte"
    elif "/" in text or "\\" in text or os.sep in text:
        problem = "contains a path separator"
    elif ".." in text:
        problem = "contains '..'"
    elif text[0] in ".-":
        problem = f"starts with {text[0]!r}"
    elif len(text) > MAX_NAME_LEN:
        problem = f"is {len(text)} characters long (at most {MAX_NAME_LEN})"
    elif strict and not _NAME_RE.match(text):
        problem = "has characters outside letters, digits and _ . + = , @ -"
    if problem:
        raise ConfigError(
            f"{what}={text!r}: {problem}; it names a directory or file, so use letters, digits and _ . + = , @ - "
            f"(e.g. {slug(text)!r})"
        )
    return text


def slug(text: str) -> str:
    """A safe stand-in for ``text`` (shown in errors as the suggested fix)."""
    out = re.sub(r"[^A-Za-z0-9_.+=,@-]+", "_", text.replace("..", "_")).lstrip(".-_")[:MAX_NAME_LEN]
    return out or "run"


def under(parent: str | os.PathLike, *parts: str) -> str:
    """``parent/parts`` resolved (symlinks followed); refuses a result outside ``parent``."""
    base = os.path.realpath(parent)
    path = os.path.realpath(os.path.join(base, *parts))
    if path != base and not path.startswith(base + os.sep):
        raise ConfigError(f"{os.path.join(str(parent), *parts)}: resolves to {path}, outside {base}; "
                          "use another name, or pass --out DIR to write there on purpose")
    return path


def run_dir(out: str | None, name: str, create: bool = True) -> str:
    """The run directory: ``--out`` as given, else reports/runs/<name> under the cwd (which must stay under it).

    Bad ``--out`` values (an existing file, a directory that cannot be created) are one-line ConfigErrors.
    """
    if out is not None:
        if "\x00" in out or not out.strip():
            raise ConfigError(f"--out {out!r}: empty or contains a NUL byte; give a directory path")
        path = os.path.abspath(os.path.expanduser(out))
    else:
        path = under(os.path.abspath(RUNS_DIR), check_name(name, "name"))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"--out {path}: exists and is not a directory; give a directory (new or a previous run's)")
    if os.path.islink(path) and not os.path.exists(path):  # makedirs said only 'File exists'
        raise ConfigError(f"--out {path}: a symbolic link to {os.readlink(path)}, which does not exist; give a directory, "
                          "or create the link's target first")
    if not create:
        _check_creatable(path)
    if create:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--out {path}: cannot create the directory ({exc.strerror}); give a writable directory") from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"--out {path}: directory is not writable; give a writable directory")
    return path


def make_parent(path: str) -> None:
    """The folders above a file a command writes at its end (values.output_file checked them before anything ran)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)


def _check_creatable(path: str) -> None:
    """Refuse, without creating anything, a run directory that makedirs could not create."""
    ancestor = path
    while not os.path.exists(ancestor):
        parent = os.path.dirname(ancestor)
        if parent == ancestor:
            return
        ancestor = parent
    if not os.path.isdir(ancestor):
        raise ConfigError(f"--out {path}: cannot create the directory ({ancestor} is not a directory); give a writable directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {path}: cannot create the directory ({ancestor} is not writable); give a writable directory")


def store_url(run_directory: str) -> str:
    return f"sqlite:///{os.path.join(run_directory, STORE_FILE)}"
