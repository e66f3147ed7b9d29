"""Full-text search over every vault (FTS5, BM25), forgiving to natural-language queries.

Plain words (``C++``, ``what's``, ``e-mail``, ``TODO: fix``, ``10:30``) are quoted token by token so
punctuation never breaks a query; a query that uses FTS5 syntax (quotes, ``*``, AND/OR/NOT/NEAR, a
filter on a real column ``title:``/``body:``/``tags:``; parentheses then group) is passed through
(any other ``word:`` still text) and, if malformed, refused with ``invalid-input`` saying what is valid.
When requiring every word finds too little, the search relaxes to any word (still BM25 ranked)
and says so in the result.

The work is bounded (docs/limits.md): FTS5's ``snippet()`` weighs every instance of every phrase, so
its cost grows with the square of a repeated (or prefix) term (``a OR a OR ...`` kept one search busy
for a minute). Plain words are de-duplicated, a query of more than ``MAX_TERMS`` terms is refused, a
query of many or repeated terms gets its excerpts from ``excerpt.window_excerpt`` (linear) instead,
and SQLite's progress handler stops a search still running after ``DEADLINE_S`` (``invalid-input``).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import apsw

from server.errors import KmsError
from server.index.excerpt import OPERATORS, SNIPPET_MAX_BYTES, window_excerpt
from server.index.properties import Filter, filters_sql
from server.index.scripts import has_run, query_parts, runs_in_expression, searches_runs
from server.vault.scope import Vaults, VaultScope

SYNTAX_HELP = (
    'plain words; "exact phrase"; prefix*; AND / OR / NOT between terms; NEAR(a b, 10); '
    "column filters title:word, body:word, tags:word, props:word"
)
COLUMNS = ("title", "body", "tags", "props")
_COLUMN_FILTER = rf"(?<![\w.-])(?:{'|'.join(COLUMNS)})\s*:"  # title: (not subtitle: or x-title:)
_COLUMN = re.compile(_COLUMN_FILTER, re.I)
_SYNTAX = re.compile(r'["*]|\b(AND|OR|NOT|NEAR)\b')  # parentheses alone are prose: "fix login (urgent)"
RELAX_BELOW = 3
MAX_LIMIT = 50
MAX_TERMS = 64  # words and phrases' words in one query; the operators AND/OR/NOT/NEAR are not counted
SNIPPET_TERMS = 12  # more terms (or one repeated): excerpts by window_excerpt, not snippet()
DEADLINE_S = 3.0  # a search still running after this long is stopped (a backstop: real queries take ms)
PROGRESS_STEPS = 100_000  # SQLite VM steps between two looks at the clock (each look is a call into Python)
_WORD = re.compile(r"\w+")


def uses_syntax(query: str) -> bool:
    """FTS5 operators, or a filter on a real column (``title:``, ``body:``, ``tags:``); any other
    ``word:`` (``TODO: fix``, ``10:30``) is text."""
    return bool(_SYNTAX.search(query) or _COLUMN.search(query))


_COLON = re.compile(rf"({_COLUMN_FILTER})|:", re.I)  # a real column's filter, or any other colon


def _text_colons(query: str) -> str:
    """The query with every colon that does not follow a real column name made a space, so
    ``TODO: fix (login)`` keeps its parentheses but is not read as a filter on column ``TODO``."""
    return _COLON.sub(lambda m: m.group(1) or " ", query)


def plain_terms(query: str) -> list[str]:
    """Whitespace-separated pieces that contain at least one letter or digit."""
    return [p for p in query.split() if re.search(r"\w", p)]


# Words a question is made of that say nothing about its topic: the any-word fallback leaves them out
# (a note holding only "how" and "the" is no match, and ranking every note holding them is slow).
STOPWORDS = frozenset(
    """a about after all also am an and any are as at be been but by can could did do does
doing for from had has have how i if in into is it its me my no not of on or our should so than that the their
them then there these they this to too us was we were what what's when where which who why will with would you
your""".split()
)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def check_terms(terms: Sequence[str], query: str) -> None:
    """Refuse a query of more than ``MAX_TERMS`` terms (``invalid-input`` saying the limit)."""
    if len(terms) > MAX_TERMS:
        raise KmsError(
            "invalid-input",
            f"the search query has {len(terms)} terms; at most {MAX_TERMS} (AND/OR/NOT/NEAR not counted, a"
            " repeated plain word counted once): ask with fewer words",
            query=query,
        )


def _terms(expression: str) -> list[str]:
    """The words of a query or FTS5 expression, its operators left out."""
    return [w for w in _WORD.findall(expression) if w not in OPERATORS]


def snippet_costly(match: str) -> bool:
    """Whether ``snippet()`` would cost more than a window excerpt: many terms, or one repeated."""
    terms = [t.lower() for t in _terms(match)]
    return len(terms) > SNIPPET_TERMS or len(set(terms)) < len(terms)


def build_match(query: str) -> tuple[str, str | None]:
    """(strict FTS5 expression, relaxed any-word expression or None). Plain words are de-duplicated (a
    repeated word finds nothing more, and costs FTS5 the square of its repeats); too many terms are
    refused (``check_terms``)."""
    if uses_syntax(query):
        check_terms(_terms(query), query)
        return runs_in_expression(_text_colons(query)), None
    terms = list({t.lower(): t for t in plain_terms(query)}.values())  # in first-seen order
    check_terms(terms, query)
    if not terms:
        return "", None
    if any(has_run(t) for t in terms):  # words in a script without spaces: by substring (scripts.py)
        parts = []
        for t in terms:
            rest, runs = query_parts(t)
            parts += [_quote(r) for r in rest] + runs
        return " AND ".join(parts), (" OR ".join(parts) if len(parts) > 1 else None)
    strict = " ".join(_quote(t) for t in terms)
    topical = [t for t in terms if t.lower().strip("?!.,;:") not in STOPWORDS] or terms
    relaxed = " OR ".join(_quote(t) for t in topical) if len(terms) > 1 else None
    return strict, relaxed


# Weights (title 10, body 1, tags 5, property values 0.5) are the FTS table's rank config (m001, m027); ordering by the
# rank column lets FTS5 stream hits in rank order. Snippets are built in the inner query, after
# its LIMIT, so only shown hits pay for one (a note over SNIPPET_MAX_BYTES gets its excerpt from
# ``excerpt.window_excerpt`` instead: snippet()'s cost grows with the note); the inner limit is
# widened by the number of hidden notes so filtering them out afterwards can never leave a page short.
_SNIPPET = "snippet(notes_fts, 1, '**', '**', '…', 32)"  # the body's: a run matched in the cjk column is not in it
_SQL = f"""
SELECT n.id AS noteId, n.title, n.path, v.name AS vault, n.tags, n.updated_at AS updatedAt,
       -f.rank AS score, f.excerpt, n.rid
FROM (SELECT rowid, rank, CASE WHEN (SELECT size_bytes FROM notes WHERE rid = notes_fts.rowid) > {SNIPPET_MAX_BYTES}
                                 THEN NULL ELSE {_SNIPPET} END AS excerpt
      FROM notes_fts WHERE notes_fts MATCH ? ORDER BY rank LIMIT ?) f
JOIN notes n ON n.rid = f.rowid JOIN vaults v ON v.id = n.vault_id
WHERE (n.hidden_at IS NULL OR ?)
ORDER BY f.rank
LIMIT ?
"""
_SQL_WINDOW = _SQL.replace(_SNIPPET, "NULL")  # every excerpt from excerpt.window_excerpt
_HIDDEN = "SELECT count(*) FROM notes WHERE hidden_at IS NOT NULL"
# Scoped to some vaults, the inner limit would have to cover every other vault's notes: filter in one
# pass instead (snippets are then built for each candidate, which costs more but stays correct). With
# property filters (``server.index.properties``) the hits are filtered in the same one pass.
_SQL_SCOPED = f"""
SELECT n.id AS noteId, n.title, n.path, v.name AS vault, n.tags, n.updated_at AS updatedAt,
       -notes_fts.rank AS score, n.rid,
       CASE WHEN n.size_bytes > {SNIPPET_MAX_BYTES} THEN NULL
            ELSE {_SNIPPET} END AS excerpt
FROM notes_fts JOIN notes n ON n.rid = notes_fts.rowid JOIN vaults v ON v.id = n.vault_id
WHERE notes_fts MATCH ? AND (n.hidden_at IS NULL OR ?){{scope}}
ORDER BY notes_fts.rank
LIMIT ?
"""


def _run(
    conn: apsw.Connection,
    match: str,
    limit: int,
    vault_id: Vaults,
    include_hidden: bool = False,
    where: Sequence[Filter] = (),
) -> list[dict[str, Any]]:
    scope = VaultScope.of(vault_id)
    # words in a script without spaces: each excerpt is a window around them (snippet() would show the body's start)
    by_window = searches_runs(match) or snippet_costly(match)
    if where or not scope.every:
        in_scope, scope_args = scope.sql()
        cond, args = filters_sql(where) if where else ("", ())
        sql = _SQL_SCOPED.replace("{scope}", in_scope + cond)
        cur = conn.execute(
            sql.replace(_SNIPPET, "NULL") if by_window else sql, (match, include_hidden, *scope_args, *args, limit)
        )
    else:
        inner = limit + next(conn.execute(_HIDDEN))[0]
        cur = conn.execute(_SQL_WINDOW if by_window else _SQL, (match, inner, include_hidden, limit))
    names = None
    out = []
    for row in cur:
        if names is None:
            names = [d[0] for d in cur.get_description()]
        hit = dict(zip(names, row, strict=True))
        hit["tags"] = hit["tags"].split() if hit["tags"] else []
        # significant digits, not decimals: a word in most notes scores ~1e-6 and must stay positive
        hit["score"] = float(f"{hit['score']:.6g}")
        rid = hit.pop("rid")
        if hit["excerpt"] is None:  # a large note (or by_window): a window around its first match
            hit["excerpt"] = window_excerpt(conn, rid, match)
        if not hit["excerpt"].strip():
            hit["excerpt"] = hit["title"]
        out.append(hit)
    return out


def _filtered(
    conn: apsw.Connection, limit: int, vault_id: Vaults, include_hidden: bool, where: Sequence[Filter]
) -> list[dict[str, Any]]:
    """No words, only property filters: the notes that pass them, newest first (score 0)."""
    cond, args = filters_sql(where)
    in_scope, scope_args = VaultScope.of(vault_id).sql()
    cur = conn.execute(
        f"""SELECT n.id AS noteId, n.title, n.path, v.name AS vault, n.tags, n.updated_at AS updatedAt
            FROM notes n JOIN vaults v ON v.id = n.vault_id
            WHERE (n.hidden_at IS NULL OR ?){in_scope}{cond}
            ORDER BY n.updated_at DESC, n.path LIMIT ?""",
        (include_hidden, *scope_args, *args, limit),
    )
    return [
        {
            "noteId": i,
            "title": t,
            "path": p,
            "vault": v,
            "tags": tags.split() if tags else [],
            "updatedAt": u,
            "score": 0.0,
            "excerpt": t,
        }
        for i, t, p, v, tags, u in cur
    ]


@contextlib.contextmanager
def deadline(conn: apsw.Connection, seconds: float, clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """Stop the statements run inside after ``seconds`` (SQLite's progress handler), as ``invalid-input``:
    whatever a query slips past ``MAX_TERMS``, one search cannot keep the CLI or an MCP server busy."""
    end = clock() + seconds
    fired = False

    def late() -> bool:
        nonlocal fired
        fired = fired or clock() > end
        return fired

    conn.set_progress_handler(late, PROGRESS_STEPS)
    try:
        yield
    except apsw.InterruptError:
        if not fired:
            raise
        raise KmsError(
            "invalid-input",
            f"the search was stopped after {seconds:g} s; ask with fewer or less repeated words or operators",
        ) from None
    finally:
        conn.set_progress_handler(None)


def search(
    conn: apsw.Connection,
    query: str,
    limit: int = 10,
    vault_id: Vaults = None,
    *,
    include_hidden: bool = False,
    where: Sequence[Filter] = (),
    deadline_s: float = DEADLINE_S,
) -> dict[str, Any]:
    """BM25-ranked hits (positive score, higher is better); hidden notes never appear, unless the person
    asks (``kms search --include-hidden``; never an agent-facing caller). ``where``: property filters
    every hit must pass (``server.index.properties``). Bounded: ``MAX_TERMS``, ``deadline_s``."""
    limit = max(1, min(int(limit), MAX_LIMIT))
    if (not query or not query.strip()) and where:
        return {"query": query, "hits": _filtered(conn, limit, vault_id, include_hidden, where), "relaxed": False}
    if not query or not query.strip():
        return {"query": query, "hits": [], "relaxed": False}
    strict, relaxed = build_match(query)
    if not strict:
        return {"query": query, "hits": [], "relaxed": False}
    with deadline(conn, deadline_s):
        return _search(conn, query, strict, relaxed, limit, vault_id, include_hidden, where)


def _search(
    conn: apsw.Connection,
    query: str,
    strict: str,
    relaxed: str | None,
    limit: int,
    vault_id: Vaults,
    include_hidden: bool,
    where: Sequence[Filter],
) -> dict[str, Any]:
    """The strict query, then the relaxed one when it finds too little."""
    try:
        hits = _run(conn, strict, limit, vault_id, include_hidden, where)
    except apsw.SQLError as exc:
        detail = str(exc).removeprefix("SQLError: ")
        raise KmsError(
            "invalid-input", f"cannot parse the search query ({detail}); valid: {SYNTAX_HELP}", query=query
        ) from None
    result: dict[str, Any] = {"query": query, "hits": hits, "relaxed": False}
    if relaxed and len(hits) < min(RELAX_BELOW, limit):
        seen = {h["noteId"] for h in hits}
        extra = [h for h in _run(conn, relaxed, limit, vault_id, include_hidden, where) if h["noteId"] not in seen]
        if extra:
            result["hits"] = hits + extra[: limit - len(hits)]
            result["relaxed"] = True
            result["allWords"] = len(hits)  # the first ones hold every word; the rest are ranked apart
            result["note"] = "few notes contain every word; also showing notes with any of the words, ranked"
    return result
