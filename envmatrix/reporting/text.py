"""Text a run recorded (setup names, env values, root-cause lines, log tails) made safe for the page, table or file
that shows it (pure). Every report writes such text through here: a value is shown as it is, never as markup, and
never as a character that hides, reorders or corrupts what follows it."""

from __future__ import annotations

import re
from typing import Any, Sequence

# C0 controls but tab and line breaks (a terminal escape, NUL, bell), DEL, C1 controls, the bidi controls that reorder
# the text after them, and what XML 1.0 cannot hold at all (U+FFFE, U+FFFF)
_HIDDEN = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufffe\uffff]")
_LINE_BREAK = re.compile("\r\n|[\r\n\x0b\x0c\x85\u2028\u2029]")


def _escaped(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii")  # \x1b, \u202e: Python's spelling


def visible(text: Any) -> str:
    """``text`` with each hidden character written as its escape (``\\x1b``, ``\\u202e``); line breaks and tabs
    stay."""
    return _HIDDEN.sub(lambda m: _escaped(m.group()), str(text))


def one_line(text: Any) -> str:
    """:func:`visible` on one line: each line break written as its escape (``\\n``, ``\\r\\n``)."""
    return _LINE_BREAK.sub(lambda m: _escaped(m.group()), visible(text))


# Markdown: a cell is split on every '|' not preceded by a backslash (GFM, markdown-it) before inline parsing, and
# that backslash alone is dropped; '<' opens raw HTML, '&' an entity, '`' a code span, '](' a link's or an image's
# target (a '[' alone, as in '[enforce fail at ...]', stays as written).
_MARKDOWN_SPECIAL = re.compile(r"([\\|<&`]|\](?=\())")


def md_text(text: Any) -> str:
    """Plain text in a Markdown table cell or line: one line, every character shown as itself."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", one_line(text))


def md_code(text: Any, in_table: bool = True) -> str:
    """``text`` as a Markdown code span: a fence longer than any backtick run in it. In a table cell a '|' still
    needs its backslash (GFM splits cells before it finds code spans, then drops the one backslash); elsewhere a code
    span shows a backslash as itself."""
    body = one_line(text)
    body = body.replace("|", "\\|") if in_table else body
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", body)), default=0))
    pad = " " if body[:1] in ("`", " ") or body[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def md_table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table of plain-text cells (see :func:`md_text`); a cell already formatted is passed as
    :class:`MdCell`."""

    def cell(value: Any) -> str:
        return value.text if isinstance(value, MdCell) else md_text(value)

    lines = ["| " + " | ".join(map(cell, header)) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


class MdCell:
    """Markdown already written for one cell (a code span from :func:`md_code`), put in :func:`md_table` as is."""

    def __init__(self, text: str) -> None:
        self.text = text
