"""Excerpts of large notes from a bounded window around the first match.

FTS5's ``snippet()`` tokenizes and scores the whole column of every hit it is asked about, so its cost
grows with the note: one note of a few megabytes stalled every search that matched it. Notes up to
``SNIPPET_MAX_BYTES`` keep ``snippet()``; a larger note's excerpt is read here in chunks through
SQLite's incremental blob I/O, stops at the first chunk that holds a query term and marks the terms as
``snippet()`` does (``**term**``, ``…`` where text was cut). The scan itself is bounded
(``SCAN_MAX_BYTES``): a note whose match lies further in (or matches only through a folding this
module does not know) shows its beginning instead.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache, lru_cache

import apsw

from server.index.scripts import RANGES, RUN, runs_of

SNIPPET_MAX_BYTES = 64 * 1024  # notes up to this size keep FTS5's own snippet()
CHUNK_BYTES = 64 * 1024
OVERLAP_BYTES = 512  # a term cut by a chunk's end is found whole in the next one
SCAN_MAX_BYTES = 8 * 1024 * 1024
WORDS_BEFORE, WORDS_AFTER = 12, 19  # snippet()'s 32 tokens, the match among them
CHARS_BEFORE, CHARS_AFTER = 100, 200  # and no more characters than these around it

OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})  # FTS5's, never a searched word
_TERM = re.compile(r"(\w+)(\*?)")
_WORD = re.compile(r"\w+")


def fold(text: str) -> str:
    """Case and diacritics removed, as FTS5's ``unicode61 remove_diacritics 2`` compares tokens."""
    return "".join(c for c in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(c))


@cache
def _variants() -> dict[str, str]:
    """For each folded Latin letter, the letters that fold to it (é, è, ê … for e)."""
    out: dict[str, set[str]] = {}
    for code in range(0x00C0, 0x0250):
        ch = chr(code)
        folded = fold(ch)
        if len(folded) == 1 and folded.isascii():
            out.setdefault(folded, set()).update({ch, ch.lower(), ch.upper()})
    return {k: "".join(sorted(v)) for k, v in out.items()}


def terms_of(match: str) -> list[tuple[str, bool]]:
    """The words of an FTS5 expression (its operators and column names left out), folded, each with
    whether it was a prefix query (``word*``); the runs it searches the ``cjk`` column for come last, as
    written (``server.index.scripts``: they are found by substring, not folded)."""
    rest, runs = runs_of(match)
    text = re.sub(r"\b(title|body|tags|props)\s*:", " ", rest)
    seen: dict[str, bool] = {}
    for m in _TERM.finditer(text):
        word = m.group(1)
        if word in OPERATORS:
            continue
        seen[fold(word)] = seen.get(fold(word), False) or bool(m.group(2))
    return [*seen.items(), *((run, False) for run in runs if run not in seen)]


def _pattern(terms: list[tuple[str, bool]]) -> re.Pattern[str] | None:
    variants = _variants()
    parts = []
    for term, prefix in sorted(terms, key=lambda t: -len(t[0])):
        if RUN.fullmatch(term):  # a run of a script without spaces: anywhere, inside a longer run too
            parts.append(re.escape(term))
            continue
        body = "".join(f"[{re.escape(c + variants[c])}]" if c in variants else re.escape(c) for c in term)
        # a word ends at a non-word character or at a run (``Kubernetes集群``: two tokens to the index)
        tail = r"\w*" if prefix else rf"(?:(?!\w)|(?=[{RANGES}]))"
        parts.append(rf"(?:(?<!\w)|(?<=[{RANGES}]))" + body + tail)
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None


def _cut(text: str, start: int, end: int, at_start: bool, at_end: bool, pattern: re.Pattern[str] | None) -> str:
    words = list(_WORD.finditer(text, max(0, start - 400), min(len(text), end + 800)))
    first = next((i for i, w in enumerate(words) if w.end() > start), 0)
    lo = max(0, first - WORDS_BEFORE)
    hi = min(len(words), first + WORDS_AFTER + 1)
    if not words:
        return ""
    a = 0 if (lo == 0 and at_start and start - 400 <= 0) else words[lo].start()
    b = len(text) if (hi == len(words) and at_end and end + 800 >= len(text)) else words[hi - 1].end()
    # a "word" of a script without spaces is a whole run between punctuation: a sentence or more
    a, b = max(a, start - CHARS_BEFORE), min(b, end + CHARS_AFTER)
    piece = text[a:b]
    if pattern is not None:
        piece = pattern.sub(lambda m: f"**{m.group(0)}**", piece)
    return ("" if a == 0 and at_start else "…") + piece.strip() + ("" if b == len(text) and at_end else "…")


@lru_cache(maxsize=64)  # a search asks once for each of its hits
def _compiled(match: str) -> tuple[re.Pattern[str] | None, list[str] | None]:
    """The pattern marking ``match``'s terms, and its terms when all are ASCII (a quick look for them first)."""
    terms = terms_of(match)
    return _pattern(terms), [t for t, _prefix in terms] if all(t.isascii() for t, _ in terms) else None


def window_excerpt(conn: apsw.Connection, rid: int, match: str) -> str:
    """The excerpt of note ``rid`` for the FTS5 expression ``match``, reading at most ``SCAN_MAX_BYTES``."""
    pattern, plain = _compiled(match)
    blob = conn.blob_open("main", "notes", "body", rid, False)
    try:
        size = blob.length()
        offset = 0
        first: tuple[str, bool, bool] | None = None
        while offset < min(size, SCAN_MAX_BYTES):
            blob.seek(offset)
            data = blob.read(CHUNK_BYTES)
            at_start, at_end = offset == 0, offset + len(data) >= size
            text = data.decode("utf-8", "ignore")
            if first is None:
                first = (text, at_start, at_end)
            # a quick look first (ASCII terms in ASCII text: no accented letter can match there)
            missed = plain is not None and text.isascii() and not any(t in text.lower() for t in plain)
            found = pattern.search(text) if pattern is not None and not missed else None
            if found is not None:
                return _cut(text, found.start(), found.end(), at_start, at_end, pattern)
            if at_end:
                break
            offset += CHUNK_BYTES - OVERLAP_BYTES
    finally:
        blob.close()
    if first is None:
        return ""
    return _cut(first[0], 0, 0, first[1], first[2], pattern)
