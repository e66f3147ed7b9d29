"""The shared Markdown line rules (``server.vault.markdown``): the index, the chunker, the frontmatter
editor and the write operations all read a note through them, so they can't disagree."""

from __future__ import annotations

import pytest

from server.index.embed.chunker import sections
from server.vault import frontmatter
from server.vault.frontmatter_read import split_frontmatter
from server.vault.markdown import (
    LineCounter,
    Span,
    Unclosed,
    atx_heading,
    body_offset,
    fence_closes,
    frontmatter_span,
    frontmatter_yaml,
    line_count,
    split_lines,
)
from server.vault.parser import parse_note


@pytest.mark.parametrize(
    ("text", "span", "yaml"),
    [
        ("no frontmatter\n", None, None),
        ("---\na: 1\n---\nbody\n", Span(4, 9, 13), "a: 1"),
        ("---\r\na: 1\r\n---\r\nbody\r\n", Span(5, 11, 16), "a: 1"),
        ("---  \na: 1\n...\nbody", Span(6, 11, 15), "a: 1"),
        ("---\n---\nbody", Span(4, 4, 8), ""),
        ("---\na: 1\n---", Span(4, 9, 12), "a: 1"),
        ("----\na: 1\n---\n", None, None),  # not an opening line
        ("---x\n", None, None),
    ],
)
def test_frontmatter_span(text: str, span: Span | None, yaml: str | None) -> None:
    assert frontmatter_span(text) == span
    raw, body, offset = split_frontmatter(text)  # what the index reads
    assert raw == yaml and offset == (span.body_start if span else 0) and body == text[offset:]
    if span is not None:
        assert frontmatter_yaml(text, span) == yaml and body_offset(text) == span.body_start


@pytest.mark.parametrize("text", ["---", "---\n", "---\na: 1\n", "---\na: 1\n---x\n"])
def test_unclosed_frontmatter_is_no_frontmatter_to_the_index_and_refused_by_the_editor(text: str) -> None:
    with pytest.raises(Unclosed):
        frontmatter_span(text)
    assert split_frontmatter(text) == (None, text, 0) and body_offset(text) == 0
    with pytest.raises(Exception, match="never closed"):
        frontmatter.apply_props(text, {"a": 2}, [])


def test_the_editor_edits_the_block_the_index_reads() -> None:
    text = "---\ta\n---\nnot: frontmatter\n"  # a tab after the dashes that is not allowed: no block
    assert frontmatter_span(text) is None and parse_note(text, "t").frontmatter is None
    edited = frontmatter.apply_props("---  \r\na: 1\r\n...\r\nbody\r\n", {"b": 2}, [], newline="\r\n").new_text
    assert edited == "---  \r\na: 1\r\nb: 2\r\n...\r\nbody\r\n"
    assert parse_note(edited, "t").frontmatter == {"a": 1, "b": 2}


@pytest.mark.parametrize(
    ("line", "heading"),
    [
        ("# Title", (1, "Title")),
        ("###### six", (6, "six")),
        ("####### seven", None),
        ("#", (1, "")),
        ("## closed ##", (2, "closed")),
        ("#tag", None),
        ("   # indented", (1, "indented")),
        ("    # code", None),
        ("#\tTab", (1, "Tab")),
    ],
)
def test_atx_heading(line: str, heading: tuple[int, str] | None) -> None:
    assert atx_heading(line) == heading


def test_fences_close_only_on_a_bare_fence_as_long() -> None:
    assert fence_closes("```", "```") and fence_closes("```", "`````  ")
    assert not fence_closes("```", "```python") and not fence_closes("````", "```")
    assert not fence_closes("~~~", "```")
    body = "# A\n```\n# not a heading\n```python\n# still code\n```\n# B\nb\n"
    assert [h for h, _t in sections(body)] == ["A", "B"]
    assert [h.text for h in parse_note(body, "t").headings] == ["A", "B"]  # the index agrees


def test_lines() -> None:
    assert split_lines("a\r\nb\n\nc") == ["a\r\n", "b\n", "\n", "c"]
    assert split_lines("") == [] and line_count("") == 0
    for text in ("a\nb", "a\nb\n", "\n\n", "x"):
        assert line_count(text) == len(split_lines(text))


def test_line_counter_counts_forward_and_starts_over_when_asked_for_an_earlier_offset() -> None:
    body = "a\nb\nc\nd\n"
    line_of = LineCounter(body, 10)
    assert [line_of(p) for p in (0, 2, 6, 7, 4, 0, 8)] == [10, 11, 13, 13, 12, 10, 14]
