"""Read the `export` blocks people paste into issues (seed 003) as atoms.

Only the part of shell syntax that such blocks use is accepted: blank lines,
``#`` comments, ``[export] KEY=VALUE...``, ``unset NAME...``, single and double
quotes, backslash escapes and ``$VAR`` / ``${VAR}`` references. Everything else
(command substitution, ``source``, control flow, line continuations, a command
after the assignments, ...) is a :class:`ConfigError` naming ``where:line``.

Path lists: ``VAR=X1:X2:$VAR`` becomes ``prepend`` atoms X1, X2 and
``VAR=$VAR:Y1`` ``append`` atoms, one atom per entry (``${VAR:+:$VAR}`` and
``${VAR:+$VAR:}``, the forms envmatrix writes, read as ``:$VAR`` and ``$VAR:``). Several such lines for the
same VAR accumulate in the order a shell would produce, so seed 003's::

    export LD_LIBRARY_PATH=/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib:$LD_LIBRARY_PATH
    export LD_LIBRARY_PATH=/soft/libraries/hwloc/lib/:$LD_LIBRARY_PATH

gives prepend(/soft/libraries/hwloc/lib/), prepend(/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib)
(reading order of the final value, which is what ``materialize`` expects).

Atoms come out grouped by variable, in order of each variable's first
appearance; within a variable: its set/unset atom (if any), then prepends, then
appends. ``format_env_file`` writes such a tuple back as ``export`` lines that
parse to the same atoms (``env.atoms.shell_line``: a path entry adds no empty
entry, the current directory, where the variable is unset).
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from envmatrix.env.atoms import APPEND, PREPEND, SET, UNSET, Atom, shell_line
from envmatrix.env.merge import materialize
from envmatrix.errors import ConfigError

__all__ = ["parse_env_file", "format_env_file", "ALLOWED"]

ALLOWED = "allowed: KEY=VALUE lines, export/unset, quotes, comments and $VAR references"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME_FULL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SHELL_WORDS = {
    "source": "sourcing another file",
    ".": "sourcing another file",
    "if": "control flow",
    "then": "control flow",
    "else": "control flow",
    "elif": "control flow",
    "fi": "control flow",
    "for": "control flow",
    "while": "control flow",
    "until": "control flow",
    "do": "control flow",
    "done": "control flow",
    "case": "control flow",
    "esac": "control flow",
    "function": "a function definition",
    "alias": "an alias",
    "eval": "eval",
    "declare": "declare",
    "typeset": "typeset",
    "local": "local",
    "readonly": "readonly",
    "module": "a module command",
    "set": "the set builtin",
}
_CONTINUATION = "line continuation '\\' at end of line is not supported"
# unquoted characters that make a line more than an assignment
_OPERATORS = {
    ";": "a command separator ';'",
    "&": "'&' (background or &&)",
    "|": "a pipe '|'",
    "<": "a redirection '<'",
    ">": "a redirection '>'",
    "(": "a subshell or array '('",
    ")": "')'",
}

# tokens of one value: ("lit", text), ("ref", NAME), or a path reference that adds its ':' only where NAME is set and
# not empty, as envmatrix writes path entries: ("lead", NAME) for ${NAME:+:$NAME}, ("trail", NAME) for ${NAME:+$NAME:}
_Token = tuple[str, str]
_PATH_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\+(:?)\$(?:\{\1\}|\1)(:?)\}")


class _Reject(Exception):
    """A construct outside the accepted subset; turned into ConfigError with where:line."""


def _short(line: str) -> str:
    line = line.strip()
    return repr(line if len(line) <= 80 else line[:77] + "...")


def _read_ref(s: str, i: int) -> tuple[_Token | None, int]:
    """``s[i] == '$'``; returns the reference token (or None for a literal '$') and the next index."""
    nxt = s[i + 1] if i + 1 < len(s) else ""
    if nxt == "(":
        raise _Reject("command substitution $(...) is not supported")
    path_ref = _PATH_REF.match(s, i)
    if path_ref and len(path_ref.group(2) + path_ref.group(3)) == 1:
        return ("lead" if path_ref.group(2) else "trail", path_ref.group(1)), path_ref.end()
    if nxt == "{":
        end = s.find("}", i + 2)
        if end < 0:
            raise _Reject("unterminated ${...}")
        inner = s[i + 2 : end]
        if not _NAME_FULL.match(inner):
            raise _Reject(f"parameter expansion ${{{inner}}} is not supported (only ${{NAME}})")
        return ("ref", inner), end + 1
    m = _NAME.match(s, i + 1)
    if m:
        return ("ref", m.group(0)), m.end()
    if nxt and (nxt.isdigit() or nxt in "?$!#*@-"):
        raise _Reject(f"special parameter ${nxt} is not supported")
    if nxt in ("'", '"'):
        raise _Reject("$'...' / $\"...\" quoting is not supported")
    return ("lit", "$"), i + 1


def _lex_value(s: str, i: int) -> tuple[list[_Token], int]:
    """Lex one shell word starting at ``s[i]``; returns tokens and the index after the word."""
    toks: list[_Token] = []
    buf: list[str] = []

    def flush() -> None:
        if buf:
            toks.append(("lit", "".join(buf)))
            buf.clear()

    def expansion(i: int) -> int:
        """``$...`` (a reference or a literal ``$``) or a refused backtick at ``s[i]``, inside or outside double quotes."""
        if s[i] == "`":
            raise _Reject("command substitution with backticks is not supported")
        tok, i = _read_ref(s, i)
        if tok[0] != "lit":
            flush()
            toks.append(tok)
        else:
            buf.append(tok[1])
        return i

    word_start = i
    n = len(s)
    while i < n:
        c = s[i]
        if c in " \t":
            break
        if c == "'":
            end = s.find("'", i + 1)
            if end < 0:
                raise _Reject("unterminated single quote")
            buf.append(s[i + 1 : end])
            i = end + 1
        elif c == '"':
            i += 1
            while True:
                if i >= n:
                    raise _Reject("unterminated double quote")
                d = s[i]
                if d == '"':
                    i += 1
                    break
                if d == "\\":
                    e = s[i + 1] if i + 1 < n else ""
                    if e in ('"', "\\", "$", "`"):
                        buf.append(e)
                        i += 2
                    else:
                        buf.append("\\")
                        i += 1
                elif d in "$`":
                    i = expansion(i)
                else:
                    buf.append(d)
                    i += 1
        elif c == "\\":
            if i + 1 >= n:
                raise _Reject(_CONTINUATION)
            buf.append(s[i + 1])
            i += 2
        elif c in "$`":
            i = expansion(i)
        elif c in _OPERATORS:
            raise _Reject(f"{_OPERATORS[c]} is not supported")
        elif c == "~" and (i == word_start or s[i - 1] == ":"):
            raise _Reject("tilde expansion '~' is not supported (write $HOME)")
        else:
            buf.append(c)
            i += 1
    flush()
    return toks, i


def _rest_is_comment(s: str, i: int) -> None:
    """After a word: only whitespace and an optional ``# comment`` may follow."""
    rest = s[i:].lstrip(" \t")
    if rest == "\\":
        raise _Reject(_CONTINUATION)
    if rest[:1] in _OPERATORS:
        raise _Reject(f"{_OPERATORS[rest[0]]} is not supported")
    if rest and not rest.startswith("#"):
        raise _Reject(f"unexpected text after the value: {rest[:40]!r} (only more KEY=VALUE assignments may follow)")


def _split_components(toks: list[_Token]) -> list[list[_Token]]:
    """Split tokens on ':' in literal text: one list of tokens per path component."""
    comps: list[list[_Token]] = [[]]
    for kind, text in toks:
        if kind == "lead":
            comps.append([("ref", text)])
            continue
        if kind in ("ref", "trail"):
            comps[-1].append(("ref", text))
            if kind == "trail":
                comps.append([])
            continue
        parts = text.split(":")
        for k, part in enumerate(parts):
            if k:
                comps.append([])
            if part:
                comps[-1].append(("lit", part))
    return comps


def _expand(toks: Sequence[_Token], env: Mapping[str, str]) -> str:
    def one(kind: str, text: str) -> str:
        if kind == "lit":
            return text
        value = env.get(text, "")
        return value and {"lead": ":" + value, "trail": value + ":"}.get(kind, value)

    return "".join(one(kind, text) for kind, text in toks)


class _VarState:
    """Atoms of one variable: an optional set/unset base, prepends (reading order), appends."""

    __slots__ = ("base", "front", "back")

    def __init__(self) -> None:
        self.base: Atom | None = None
        self.front: list[str] = []
        self.back: list[str] = []

    def atoms(self, var: str) -> list[Atom]:
        out = [self.base] if self.base is not None else []
        out += [Atom(var, PREPEND, v) for v in self.front]
        out += [Atom(var, APPEND, v) for v in self.back]
        return out


def _flatten(state: dict[str, _VarState]) -> list[Atom]:
    return [a for var, st in state.items() for a in st.atoms(var)]


def parse_env_file(text: str, inherited: Mapping[str, str], where: str = "env file") -> tuple[Atom, ...]:
    """Parse an env file (``export`` block) into atoms; see the module docstring for the subset."""
    state: dict[str, _VarState] = {}
    env = dict(inherited)  # the shell's view: inherited overlaid with the file so far

    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            if "\x00" in line:  # no shell keeps one, and execve cannot pass it to a rank
                raise _Reject("a NUL byte is not text")
            _parse_line(line, state, env, inherited)
        except _Reject as exc:
            raise ConfigError(f"{where}:{lineno}: {_short(line)}: {exc}; {ALLOWED}") from None
    return tuple(_flatten(state))


def _parse_line(line: str, state: dict[str, _VarState], env: dict[str, str], inherited: Mapping[str, str]) -> None:
    first = re.split(r"[ \t]", line, maxsplit=1)[0]
    if first == "unset":
        names = line[len("unset") :].split("#", 1)[0].split()
        if names and names[-1].endswith("\\"):
            raise _Reject(_CONTINUATION)
        if not names:
            raise _Reject("unset needs a variable name")
        for name in names:
            if not _NAME_FULL.match(name):
                raise _Reject(f"unset {name!r}: not a variable name (options such as -f are not supported)")
            st = state.setdefault(name, _VarState())
            st.base, st.front, st.back = Atom(name, UNSET), [], []
            env.pop(name, None)
        return
    body = line
    if first == "export":
        body = line[len("export") :].lstrip(" \t")
        if not body or body.startswith("#"):
            raise _Reject("export needs KEY=VALUE")
        if body.startswith("-"):
            raise _Reject("export options are not supported")
    m = _NAME.match(body)
    if not m or m.end() >= len(body) or body[m.end()] != "=":
        if m and first == "export" and (m.end() == len(body) or body[m.end()] in " \t"):
            # ``export NAME`` (no value): every assignment here is already exported
            rest = body[m.end() :]
            _rest_is_comment(rest, 0)
            return
        if m and m.end() < len(body) and body[m.end() : m.end() + 2] == "+=":
            raise _Reject("'+=' is not supported (write VAR=$VAR:...)")
        word = first if first != "export" else (body.split()[0] if body.split() else body)
        if word in _SHELL_WORDS:
            raise _Reject(f"{_SHELL_WORDS[word]} ({word!r}) is not supported")
        if line.endswith("\\"):
            raise _Reject(_CONTINUATION)
        if "`" in line or "$(" in line:
            raise _Reject("command substitution is not supported")
        raise _Reject("not a KEY=VALUE assignment")
    toks, end = _lex_value(body, m.end() + 1)
    assignments = [(m.group(0), toks)]
    while True:  # ``export A=1 B=2`` and ``A=1 B=2``, as job scripts write them
        start = end
        while start < len(body) and body[start] in " \t":
            start += 1
        more = _NAME.match(body, start) if start > end else None
        if more is None or body[start] == "#":
            break
        if more.end() < len(body) and body[more.end()] == "=":
            toks, end = _lex_value(body, more.end() + 1)
            assignments.append((more.group(0), toks))
        elif first == "export" and (more.end() == len(body) or body[more.end()] in " \t"):
            end = more.end()  # ``export A=1 B``: B is exported already, as every assignment here is
        else:
            break
    _rest_is_comment(body, end)
    # bash expands every word of an ``export`` line before it assigns any; bare assignments run left to right
    view = dict(env) if first == "export" else env
    for var, toks in assignments:
        _assign(var, toks, state, env, inherited, view)


def _assign(var: str, toks: list[_Token], state: dict[str, _VarState], env: dict[str, str], inherited: Mapping[str, str],
            view: Mapping[str, str]) -> None:
    """One assignment: ``view`` is what its ``$VAR`` references read, ``env`` the shell's view it updates."""
    comps = _split_components(toks)
    self_ref = [("ref", var)]
    prepend = len(comps) >= 1 and comps[-1] == self_ref
    append = len(comps) >= 1 and comps[0] == self_ref
    st = state.setdefault(var, _VarState())
    if prepend and append and len(comps) > 1:
        # $VAR:x:$VAR duplicates the old value: plain assignment, expanded
        prepend = append = False
    if prepend or append:
        middle = comps[:-1] if prepend else comps[1:]
        entries: list[str] = []
        for comp in middle:
            entries.extend(_expand(comp, view).split(":"))
        if prepend:
            st.front = entries + st.front
        else:
            st.back = st.back + entries
    else:
        st.base, st.front, st.back = Atom(var, SET, _expand(toks, view)), [], []
    # the shell's value after this line, as materialize will produce it
    value = materialize(inherited, st.atoms(var)).get(var)
    if value is None:
        env.pop(var, None)
    else:
        env[var] = value


def format_env_file(atoms: Sequence[Atom]) -> str:
    """``export`` lines for ``atoms`` that ``parse_env_file`` reads back as the same atoms.

    Exact for tuples in the canonical order ``parse_env_file`` returns (grouped by
    variable: set/unset, prepends, appends); any other order comes back in that
    canonical order with the same materialized env. Prepends are written one per
    line from the last entry to the first, as people write them (seed 003).
    """
    state: dict[str, _VarState] = {}
    for atom in atoms:
        if not _NAME_FULL.match(atom.var):
            raise ConfigError(f"atom {atom}: {atom.var!r} is not a variable name; allowed: [A-Za-z_][A-Za-z0-9_]*")
        st = state.setdefault(atom.var, _VarState())
        if atom.op in (SET, UNSET):
            st.base = atom
        elif atom.op in (PREPEND, APPEND):
            if ":" in atom.value:
                raise ConfigError(
                    f"atom {atom}: path entry {atom.value!r} contains ':'; allowed: one path entry per atom"
                )
            (st.front if atom.op == PREPEND else st.back).append(atom.value)
        else:
            raise ConfigError(f"atom {atom.var}: op {atom.op!r} unknown; allowed: set, unset, prepend, append")
    lines: list[str] = []
    for var, st in state.items():
        ordered = ([st.base] if st.base is not None else []) + [Atom(var, PREPEND, v) for v in reversed(st.front)]
        lines += [shell_line(a) for a in ordered + [Atom(var, APPEND, v) for v in st.back]]
    return "".join(line + "\n" for line in lines)
