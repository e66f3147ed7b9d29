"""Where in a note a write goes: writable lines, headings and their sections, blocks.

Pure functions of the note's text (no I/O), shared by the operations: ``kms_append``
with ``heading`` and ``kms_insert_at`` with ``afterHeading`` both end up at
``after_section``, so the two say the same thing about "after this heading's content".
Ambiguity is an error naming the candidates, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from server.errors import KmsError
from server.vault import summary as summary_codec
from server.vault.markdown import (
    ATX,
    FENCE,
    SETEXT_UNDERLINE,
    bare,
    body_offset,
    fence_closes,
    line_starts,
    split_lines,
)
from server.vault.parser import parse_note
from server.writes.limits import MAX_HEADING_CHARS, MAX_QUERY_CHARS

POSITION_KINDS = ("afterHeading", "beforeHeading", "afterBlockContaining", "atLine")


def writable_start(text: str) -> int:
    """First line index agents may insert at: after the frontmatter and the AI summary block."""
    offset = body_offset(text)
    summary, rest = summary_codec.decode(text[offset:])
    if summary is not None:
        offset = len(text) - len(rest)
    # the index of the first line starting at or after ``offset`` (no list of lines needed)
    return text.count("\n", 0, offset) + (0 if offset == 0 or text[offset - 1] == "\n" else 1)


@dataclass(frozen=True)
class HeadingPos:
    level: int
    text: str
    line: int  # 0-based index of the heading's first line
    last: int  # 0-based index of its last line (setext underline)


def headings(text: str, title: str) -> list[HeadingPos]:
    """Headings as the indexer sees them (CommonMark: none inside code), with line positions."""

    lines = split_lines(text)
    out: list[HeadingPos] = []
    for h in parse_note(text, title).headings:
        i = h.line - 1
        last = i
        if 0 <= i < len(lines) and not ATX.match(bare(lines[i])):
            j = i + 1  # setext: the heading ends at its underline
            while j < len(lines) and bare(lines[j]).strip():
                if SETEXT_UNDERLINE.match(bare(lines[j])):
                    last = j
                    break
                j += 1
        out.append(HeadingPos(h.level, h.text, i, last))
    return out


def _norm_ws(s: str) -> str:
    return " ".join(s.split())


def find_heading(heads: list[HeadingPos], query: Any) -> tuple[int, HeadingPos]:
    """The one heading ``query`` names ("Tasks" or "## Tasks"); exact text first, then any case."""
    if not isinstance(query, str) or not query.strip() or len(query) > MAX_HEADING_CHARS:
        raise KmsError("invalid-input", f"heading must be a non-empty string of at most {MAX_HEADING_CHARS} characters")
    m = re.match(r"^\s*(#{1,6})\s+(.*)$", query)
    level, want = (len(m.group(1)), m.group(2)) if m else (None, query)
    want = _norm_ws(re.sub(r"\s+#+\s*$", "", want))
    pool = [(i, h) for i, h in enumerate(heads) if level is None or h.level == level]
    found = [(i, h) for i, h in pool if _norm_ws(h.text) == want]
    if not found:
        found = [(i, h) for i, h in pool if _norm_ws(h.text).casefold() == want.casefold()]
    if len(found) == 1:
        return found[0]
    show = found or list(enumerate(heads))
    candidates = [f"{'#' * h.level} {h.text} (line {h.line + 1})" for _, h in show[:30]]
    if not found:
        raise KmsError(
            "invalid-input",
            f"no heading {query!r} in the note; headings: {'; '.join(candidates) or 'none'}",
            candidates=candidates,
        )
    raise KmsError(
        "invalid-input",
        f"heading {query!r} matches {len(found)} headings; use '## Text' with the level or another position: "
        + "; ".join(candidates),
        candidates=candidates,
    )


def section_last_line(lines: list[str], heads: list[HeadingPos], idx: int) -> int:
    """Last non-blank line of the section under heads[idx] (up to the next heading of same or higher level)."""
    h = heads[idx]
    end = len(lines)
    for other in heads[idx + 1 :]:
        if other.level <= h.level:
            end = other.line
            break
    j = end - 1
    while j > h.last and not bare(lines[j]).strip():
        j -= 1
    return max(j, h.last)


def blocks(lines: list[str], start: int) -> list[tuple[int, int]]:
    """Blocks (first, last line) from ``start``: paragraphs, single headings, whole fenced code."""
    out: list[tuple[int, int]] = []
    i, n = start, len(lines)
    while i < n:
        s = bare(lines[i])
        if not s.strip():
            i += 1
            continue
        fence = FENCE.match(s)
        if fence:
            j = i + 1
            while j < n and not fence_closes(fence.group(1), bare(lines[j])):
                j += 1
            out.append((i, min(j, n - 1)))
            i = j + 1
            continue
        if ATX.match(s):
            out.append((i, i))
            i += 1
            continue
        j = i
        while j + 1 < n:
            nxt = bare(lines[j + 1])
            if not nxt.strip() or FENCE.match(nxt) or ATX.match(nxt):
                break
            j += 1
        out.append((i, j))
        i = j + 1
    return out


def line_end(lines: list[str], starts: list[int], j: int) -> int:
    """Offset just before line j's line ending."""
    return starts[j] + len(bare(lines[j]))


def insert_before_line(text: str, lines: list[str], k: int, content: str, nl: str, pad: bool) -> tuple[int, str]:
    """(offset, inserted text) to put ``content`` as whole line(s) before line k (k == len: at the end).

    ``pad`` surrounds it with blank lines so it becomes its own Markdown block.
    """
    if k >= len(lines) and text and not text.endswith("\n"):
        # the last line has no newline: start a new line and keep "no trailing newline"
        return len(text), (nl + nl if pad else nl) + content
    pos = line_starts(lines)[k] if k < len(lines) else len(text)
    ins = content + nl
    if pad:
        if k > 0 and bare(lines[k - 1]).strip():
            ins = nl + ins
        if k < len(lines) and bare(lines[k]).strip():
            ins = ins + nl
    return pos, ins


def after_section(text: str, title: str, heading: str | None, body: str, sep: str, nl: str) -> tuple[int, str]:
    """(offset, inserted text) for ``sep + body`` right after the last non-blank line of the section
    under ``heading`` (None: of the note) — the rule of ``kms_append`` and of ``afterHeading``."""
    lines = split_lines(text)
    first = writable_start(text)
    if heading is not None:
        heads = [h for h in headings(text, title) if h.line >= first]
        idx, _h = find_heading(heads, heading)
        j = section_last_line(lines, heads, idx)
    else:
        j = len(lines) - 1
        while j >= first and not bare(lines[j]).strip():
            j -= 1
        if j < first:  # nothing written yet: the text starts the body
            return insert_before_line(text, lines, first, body, nl, pad=False)
    return line_end(lines, line_starts(lines), j), sep + body


def parse_position(position: Any) -> tuple[str, Any]:
    """``{kind: argument}`` with exactly one known kind, checked."""
    if isinstance(position, dict):
        position = {k: v for k, v in position.items() if v is not None}  # a model dump with unset keys
    if not isinstance(position, dict) or len(position) != 1 or next(iter(position)) not in POSITION_KINDS:
        raise KmsError(
            "invalid-input",
            "position must be exactly one of {afterHeading: str}, {beforeHeading: str}, "
            "{afterBlockContaining: str}, {atLine: int}",
        )
    kind, arg = next(iter(position.items()))
    limit = MAX_QUERY_CHARS if kind == "afterBlockContaining" else MAX_HEADING_CHARS
    if kind == "atLine":
        if isinstance(arg, bool) or not isinstance(arg, int) or arg < 1:
            raise KmsError("invalid-input", "atLine must be a line number (1-based)")
    elif not isinstance(arg, str) or not arg.strip() or len(arg) > limit:
        raise KmsError("invalid-input", f"{kind} must be a non-empty string of at most {limit} characters")
    return kind, arg
