"""Rewrite the wiki-links of a note's text that point at a renamed or moved note.

The links rewritten are exactly the ones the parser (``server.vault.parser``) counts: every
``[[target]]`` form (``[[Title]]``, ``[[path/Title]]``, ``[[Title|alias]]``,
``[[Title#Heading]]``, ``[[Title#^block]]``, ``[[Title\\|alias]]`` in tables, embeds
``![[...]]``) in the body outside code and the summary block, and the ones written in
frontmatter values. Only the target part changes: the heading, block and alias parts, the
spacing and the ``!`` stay exactly as written. The parser knows no Markdown ``[text](path)``
links, so neither does this (a link the index does not know cannot be found to rewrite).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from server.vault import summary as summary_codec
from server.vault.parser import _WIKILINK, _inside, _merge, _structure, link_key, split_frontmatter

_TARGET_END = re.compile(r"\\\||[|#^]")


def _spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the inner text of every wiki-link the parser counts, in text order."""
    _raw, _body, offset = split_frontmatter(text)
    out: list[tuple[int, int]] = []
    if offset and "[[" in text[:offset]:
        out += [(m.start(1), m.end(1)) for m in _WIKILINK.finditer(text, 0, offset)]
    region = text[offset:]
    _summary, rest = summary_codec.decode(region)
    start = offset + len(region) - len(rest)
    if "[[" not in rest:
        return out
    code = _merge(_structure(rest)[0])
    starts = [s for s, _ in code]
    for m in _WIKILINK.finditer(rest):
        if not (code and _inside(code, starts, m.start())):
            out.append((start + m.start(1), start + m.end(1)))
    return out


def rewrite_links(text: str, new_target: Callable[[str], str | None]) -> tuple[str, int]:
    """``text`` with each link's target replaced by ``new_target(target as written)`` where that is
    not None; returns the new text and how many links changed."""
    pieces: list[str] = []
    pos = changed = 0
    for a, b in _spans(text):
        inner = text[a:b]
        cut = _TARGET_END.search(inner)
        end = cut.start() if cut else len(inner)
        raw = inner[:end]
        target = raw.strip()
        if not target:
            continue  # [[#Heading]]: a link inside its own note
        new = new_target(target)
        if new is None or new == target:
            continue
        lead = raw[: len(raw) - len(raw.lstrip())]
        trail = raw[len(raw.rstrip()) :]
        pieces += [text[pos:a], lead, new, trail]
        pos = a + end
        changed += 1
    if not changed:
        return text, 0
    pieces.append(text[pos:])
    return "".join(pieces), changed


def retarget(old_path: str, new_path: str, old_title: str, new_title: str) -> Callable[[str], str | None]:
    """The ``new_target`` for a note going from ``old_path`` (title ``old_title``) to ``new_path``.

    A link written as a path gets the new path (keeping a leading ``/`` and a ``.md`` suffix if
    it had them); one written as the title gets the new title; an alias stays (it still resolves).
    """
    old_key = link_key(old_path)
    title_key = old_title.lower()
    new_stem = new_path[:-3] if new_path.lower().endswith(".md") else new_path

    def new_target(target: str) -> str | None:
        key = link_key(target)
        if key == old_key and ("/" in target or key != title_key):
            slash = "/" if target.startswith("/") else ""
            suffix = target[-3:] if target.lower().endswith(".md") else ""
            return slash + new_stem + suffix
        if key == title_key:
            suffix = target[-3:] if target.lower().endswith(".md") else ""
            return new_title + suffix
        return None

    return new_target
