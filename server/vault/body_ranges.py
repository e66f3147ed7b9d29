"""Where code, links and headings lie in a note's body: the Markdown parser's ranges, and when it can be skipped.

Its own room because two readers need exactly the same answer: the note parser (``server.vault.parser``:
no tag or link inside code) and the link rewriter (``server.vault.links``: a rename rewrites no link inside
code). It wraps pyromark (CommonMark via pulldown-cmark) and the test that lets most bodies skip it.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from typing import Any

import pyromark

_CODE_STARTS = frozenset(("CodeBlock", "HtmlBlock", "MetadataBlock"))
_CODE_EVENTS = frozenset(("Code", "InlineHtml", "Html", "InlineMath"))
_OPTIONS = pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_STRIKETHROUGH | pyromark.Options.ENABLE_TASKLISTS


def _to_char_offsets(body: str, events: list) -> list:
    """pyromark reports UTF-8 byte offsets; map them to str indexes in one pass."""
    raw = body.encode("utf-8")
    offsets = sorted({r["start"] for _, r in events} | {r["end"] for _, r in events})
    mapping: dict[int, int] = {}
    prev_b = prev_c = 0
    for off in offsets:
        prev_c += len(raw[prev_b:off].decode("utf-8", "replace"))
        prev_b = off
        mapping[off] = prev_c
    return [(e, {"start": mapping[r["start"]], "end": mapping[r["end"]]}) for e, r in events]


MdLink = tuple[int, int, str, str, bool]  # start, end, destination, reference label, image


def body_structure(
    body: str, mdlinks: list[MdLink] | None = None
) -> tuple[list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, int, int]]]:
    """Ranges of code (no tags/links), of links (no tags), and headings;
    the Markdown links and images go into ``mdlinks`` when given (autolinks are URLs: left out).
    Public so the link rewriter skips exactly the code the parser skips."""
    code: list[tuple[int, int]] = []
    notags: list[tuple[int, int]] = []
    heads: list[tuple[int, int, int]] = []
    # adjacent texts merged: fewer events to convert to Python, and texts are skipped anyway
    # (the ranges of every other event are the same; checked on 10k notes and 20k random documents)
    events: Iterable[Any] = pyromark.events_with_range(body, options=_OPTIONS, merge_text=True)
    if not body.isascii():
        events = _to_char_offsets(body, list(events))
    # one event per text run, list item, emphasis...: a note of 200 list items has ~1000, so the
    # common ones (text, ends) leave this loop after the fewest checks
    for event, rng in events:
        if event.__class__ is not dict:  # SoftBreak, HardBreak, Rule
            continue
        start = event.get("Start")
        if start is None:
            if not _CODE_EVENTS.isdisjoint(event):
                code.append((rng["start"], rng["end"]))
            continue
        if start.__class__ is dict:
            kind = next(iter(start))
            if kind in _CODE_STARTS:
                code.append((rng["start"], rng["end"]))
            elif kind == "Heading":  # a #tag in a heading is a tag, as Obsidian reads it
                level = int(start["Heading"]["level"][1:])
                heads.append((rng["start"], rng["end"], level))
            elif kind in ("Link", "Image"):
                notags.append((rng["start"], rng["end"]))
                if mdlinks is not None:
                    info = start[kind]
                    if info["link_type"] not in ("Autolink", "Email"):
                        mdlinks.append((rng["start"], rng["end"], info["dest_url"], info["id"], kind == "Image"))
        elif start in _CODE_STARTS:
            code.append((rng["start"], rng["end"]))
    return code, notags, heads


def merge_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint ranges covering the same positions (headings contain links, blocks contain lines),
    ready for ``in_ranges``."""
    merged: list[tuple[int, int]] = []
    for s, e in sorted(ranges):
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


def in_ranges(ranges: list[tuple[int, int]], starts: list[int], pos: int) -> bool:
    """Whether ``pos`` falls in one of ``ranges`` (disjoint and sorted, see ``merge_ranges``; ``starts``
    their start offsets), by bisection: a body with many code spans is checked per link in log time."""
    i = bisect.bisect_right(starts, pos) - 1
    return i >= 0 and ranges[i][0] <= pos < ranges[i][1]


# What only a Markdown parser can settle in a body (``body_structure``'s code, headings and Markdown links):
# a code span or fence (`` ` ``, ``~~~``), HTML or an autolink (``<``), a tab or a line indented four spaces
# (indented code), a CR (CRLF bodies are parsed), a Markdown link or definition (``](``, ``]:``, ``][``), a
# setext underline (a line of ``=`` or ``-``), a quote (``>``), and a list item that is empty, indented as
# code, or whose content opens a heading, a quote or another list (``- # x``, ``1. > x``, ``* - x``).
# Conservative: a body with none of these has no code, no Markdown link, and no heading but its ATX lines
# (``# Title``, also a list item's continuation line), which ``atx_headings`` finds as the parser does.
# Checked on tricky notes, the test vaults' and random documents (tests/unit/test_parse_skip.py).
# The marks anywhere in the body (``needs_parse``): `` ` ``, ``<``, a tab, a CR (a memchr each); ``~~~``,
# looked for only where a ``~`` is; ``](``, ``]:``, ``][`` by one regex pass (a two- or three-character
# ``in`` scans as slowly as a regex: the three of them were half of this test's time on the bench vault).
_BRACKET_MARK = re.compile(r"\][(:\[]")
_PARSE_LINE = re.compile(  # at a line's start (a literal newline first, so the engine skips ahead to each)
    r"\n(?: {4}| {0,3}(?:(?:=+|-+) *(?:\n|\Z)|>"
    r"|(?:[-*+]|\d{1,9}[.)])(?: *(?:\n|\Z)| {5}| {1,4}(?:#{1,6}(?: |\n|\Z)|[>=*+\-]|\d{1,9}[.)]))))"
)
# A line break first (matched in "\n" + body): the engine skips ahead to each one, where a multi-line ``^``
# is tried at every position (three times slower on the bench vault's bodies); the line's own break is not
# consumed, so the next line's heading still starts with one.
_ATX_LINE = re.compile(r"\n {0,3}(#{1,6})(?=[ \n]|\Z)[^\n]*")


def needs_parse(body: str) -> bool:
    """Whether pyromark must read ``body`` (the marks above, ``_PARSE_LINE``): most notes' bodies of
    prose, headings, wiki-links and tags skip it and the walk over its events."""
    return (
        "`" in body
        or "<" in body
        or "\t" in body
        or "\r" in body
        or ("~" in body and "~~~" in body)
        or _BRACKET_MARK.search(body) is not None
        or _PARSE_LINE.search("\n" + body) is not None
    )


def atx_headings(body: str) -> list[tuple[int, int, int]]:
    """The headings of a body ``needs_parse`` lets skip the parser, as ``body_structure`` gives them
    (start at the first ``#``, end after the line's newline, level)."""
    if "#" not in body:
        return []
    text = "\n" + body  # offsets in it are one past the body's; a line's end takes its break, if it has one
    last = len(text)
    return [(m.start(1) - 1, m.end() - (m.end() == last), len(m.group(1))) for m in _ATX_LINE.finditer(text)]
