"""One search's work is bounded (server/index/search.py, docs/limits.md): too many terms are refused,
repeated plain words are counted once, many or repeated terms get linear excerpts, and the deadline
stops a statement that runs on."""

from __future__ import annotations

import itertools
from pathlib import Path

import apsw
import pytest
from support.organize import index

from server.errors import KmsError
from server.index.search import MAX_TERMS, build_match, deadline, search, snippet_costly


@pytest.fixture
def many(tmp_path: Path, conn: apsw.Connection) -> apsw.Connection:
    root = tmp_path / "v"
    root.mkdir()
    words = ["tea", "tide", "tone", "tram", "twig", "tulip", "timber", "token"]
    for i in range(150):
        body = " ".join(words[(i + j) % len(words)] for j in range(300))
        (root / f"n{i:03}.md").write_text(f"# Note {i}\n\n{body}\n")
    index(conn, root)
    return conn


def test_too_many_terms_are_refused_saying_the_limit(conn: apsw.Connection) -> None:
    with pytest.raises(KmsError) as exc:
        search(conn, " OR ".join(["a"] * 199))
    assert exc.value.kind == "invalid-input" and f"at most {MAX_TERMS}" in exc.value.message
    with pytest.raises(KmsError):
        search(conn, " ".join(["t*"] * (MAX_TERMS + 1)))


def test_repeated_plain_words_count_once(many: apsw.Connection) -> None:
    hits = search(many, " ".join(["timber"] * 300), limit=5)["hits"]
    assert len(hits) == 5 and all("**timber**" in h["excerpt"].lower() for h in hits)


def test_a_query_of_repeated_prefixes_takes_window_excerpts(many: apsw.Connection) -> None:
    """snippet() with the same prefix 64 times took seconds here (minutes on a larger vault): such a query's
    excerpts are windows (linear in the note), still marking the words."""
    query = " ".join(["t*"] * MAX_TERMS)
    assert snippet_costly(build_match(query)[0]) and not snippet_costly(build_match("timber OR tree")[0])
    hits = search(many, query, limit=10)["hits"]
    assert len(hits) == 10 and all("**" in h["excerpt"] for h in hits)


def test_the_deadline_stops_a_statement_and_then_lets_the_next_run(conn: apsw.Connection) -> None:
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    clock = itertools.count(0.0, 1.0).__next__  # one second per look: over 5 s at the 6th
    with pytest.raises(KmsError) as exc, deadline(conn, 5.0, clock):
        list(conn.execute(endless))
    assert exc.value.kind == "invalid-input" and "stopped after 5 s" in exc.value.message
    assert list(
        conn.execute(
            "SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
            "WHERE x < 100000) SELECT x FROM c)"
        )
    ) == [(100000,)]
