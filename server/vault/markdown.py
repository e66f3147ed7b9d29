"""The Markdown line rules every reader and writer of a note shares: lines, the frontmatter
block, ATX headings and code fences.

The indexer (``parser``), the chunker, the frontmatter editor and the write operations used
to carry a copy each, and copies drift: a frontmatter the editor saw was not the one the
index read. One home means a write lands where the index says the heading is.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from urllib.parse import unquote

ATX = re.compile(r"^ {0,3}(#{1,6})(?=[ \t]|$)(?:[ \t]+(.*?))?[ \t#]*$")
"""An ATX heading line (CommonMark: ``#`` to ``######`` then a space or the end): level, text."""
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
"""The opening (or closing) line of a fenced code block; group 1 is the fence."""
SETEXT_UNDERLINE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
"""A URL scheme (``http:``, ``mailto:``, ``obsidian:``; a drive ``C:`` too): not a file of the vault."""


def split_lines(text: str) -> list[str]:
    """Lines with their endings; only ``\\n`` ends a line (``\\r\\n`` keeps its ``\\r``)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def bare(line: str) -> str:
    """A line without its ending (``\\n`` or ``\\r\\n``)."""
    return line.rstrip("\n").rstrip("\r")


def line_count(text: str) -> int:
    """``len(split_lines(text))`` without building the list."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def line_starts(lines: list[str]) -> list[int]:
    """The character offset where each of ``lines`` starts."""
    out, pos = [], 0
    for line in lines:
        out.append(pos)
        pos += len(line)
    return out


def atx_heading(line: str) -> tuple[int, str] | None:
    """(level, text) of an ATX heading line (without its ending), else None."""
    m = ATX.match(line)
    return (len(m.group(1)), (m.group(2) or "").strip()) if m else None


def fence_closes(opening: str, line: str) -> bool:
    """Does ``line`` close the fenced code block ``opening`` started? The same character, at least as
    many, and nothing after them (CommonMark: a fence with an info string opens a block)."""
    m = FENCE.match(line)
    return (
        m is not None
        and m.group(1)[0] == opening[0]
        and len(m.group(1)) >= len(opening)
        and not line[m.end() :].strip(" \t")
    )


# ----- frontmatter ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """Character offsets of a frontmatter block in the note text."""

    open_end: int  # after the opening '---' line
    close_start: int  # start of the closing '---' / '...' line
    body_start: int  # after the closing line


class Unclosed(Exception):
    """The text opens a frontmatter block ('---') that no closing line ends."""


_OPEN = re.compile(r"---[ \t]*\r?\n")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.MULTILINE)


def frontmatter_span(text: str) -> Span | None:
    """The YAML frontmatter block at the very start of ``text``: None when there is none, ``Unclosed``
    when the opening line is never closed. The block's YAML is ``text[open_end:close_start]``."""
    if not text.startswith("---"):
        return None
    opening = _OPEN.match(text)
    if opening is None:
        if text.rstrip(" \t") == "---":
            raise Unclosed  # '---' and nothing after it
        return None
    closing = _CLOSE.search(text, opening.end())
    if closing is None:
        raise Unclosed
    return Span(opening.end(), closing.start(), closing.end())


def frontmatter_yaml(text: str, span: Span) -> str:
    """The block's YAML without the line break before the closing line (as YAML parsers want it)."""
    return text[span.open_end : span.close_start].removesuffix("\n").removesuffix("\r")


def body_offset(text: str) -> int:
    """Where the body starts (0 when there is no, or an unclosed, frontmatter)."""
    try:
        span = frontmatter_span(text)
    except Unclosed:
        return 0
    return span.body_start if span else 0


def markdown_target(dest: str, folder: str) -> tuple[str, str, str | None] | None:
    """(path as written, decoded; vault-relative path; heading) of a Markdown link's destination,
    or None when it is not a file of the vault (a URL, ``mailto:``, a bare ``#anchor``)."""
    if not dest or dest[0] == "#" or dest.startswith("//") or SCHEME.match(dest):
        return None
    path, _, frag = dest.partition("#")
    path = path.partition("?")[0]
    if "%" in path:
        path = unquote(path)
    if not path.strip():
        return None
    path = path.strip().replace("\\", "/")
    if path.startswith("/"):
        full = posixpath.normpath(path.lstrip("/"))
    else:
        full = posixpath.normpath(posixpath.join(folder, path)) if folder else posixpath.normpath(path)
    return path, full, unquote(frag) if "%" in frag else (frag or None)


class LineCounter:
    """The file line of a body offset. Offsets are asked for in increasing runs (headings, then links),
    so each counts only the newlines since the previous one instead of from the start of the body."""

    __slots__ = ("body", "first", "pos", "line")

    def __init__(self, body: str, first_line: int) -> None:
        self.body, self.first, self.pos, self.line = body, first_line, 0, first_line

    def __call__(self, pos: int) -> int:
        if pos < self.pos:
            self.pos, self.line = 0, self.first
        self.line += self.body.count("\n", self.pos, pos)
        self.pos = pos
        return self.line
