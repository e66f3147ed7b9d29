"""A large note's search excerpt comes from a bounded window around its first match: the hits and
their excerpts are what ``snippet()`` gave, and the search reads a few pages of the note, not all of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest
from support.sql import value

from server.index.excerpt import SNIPPET_MAX_BYTES
from server.index.indexer import index_vault
from server.index.search import search
from server.store.db import connect
from server.vault.registry import add_vault

FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor\n"


@pytest.fixture
def big_vault(tmp_path: Path, db_path: Path) -> apsw.Connection:
    vault = tmp_path / "big"
    vault.mkdir()
    filler = FILLER * (3 * 1024 * 1024 // len(FILLER))  # ~3 MB
    half = len(filler) // 2
    (vault / "Huge.md").write_text(
        "# Huge\n\n" + filler[:half] + "the Café where zanzibar quokka met\n" + filler[half:] + "closing words\n"
    )
    (vault / "Small.md").write_text("# Small\n\nA short note about a zanzibar quokka and a cafe.\n")
    conn = connect(db_path)
    index_vault(conn, add_vault(conn, vault, "big"))
    return conn


class _CountingFile(apsw.VFSFile):
    def __init__(self, name: str | apsw.URIFilename | None, flags: list[int], counter: list[int]) -> None:
        super().__init__("", name, flags)
        self._counter = counter

    def xRead(self, amount: int, offset: int) -> bytes:  # noqa: N802 - APSW's name
        self._counter[0] += amount
        return super().xRead(amount, offset)


class _CountingVFS(apsw.VFS):
    """The default VFS, counting the bytes SQLite reads from the database and its WAL."""

    def __init__(self) -> None:
        self.read = [0]
        super().__init__("kms-counting", "")

    def xOpen(self, name: str | apsw.URIFilename | None, flags: list[int]) -> apsw.VFSFile:  # noqa: N802 - APSW's name
        return _CountingFile(name, flags, self.read)


def excerpts(conn: apsw.Connection, query: str, **kw: Any) -> dict[str, str]:
    return {h["title"]: h["excerpt"] for h in search(conn, query, **kw)["hits"]}


def test_a_large_note_gets_a_window_around_its_match(big_vault: apsw.Connection) -> None:
    got = excerpts(big_vault, "zanzibar")
    assert set(got) == {"Huge", "Small"}
    huge = got["Huge"]
    assert huge.startswith("…") and huge.endswith("…") and "**zanzibar** quokka met" in huge
    assert "Café where" in huge and len(huge.split()) <= 34
    assert "A short note about a **zanzibar** quokka and a cafe." in got["Small"]  # snippet(), as before


@pytest.mark.parametrize(
    ("query", "marked"),
    [
        ("cafe", "**Café**"),  # folded as FTS5 folds: case and diacritics
        ("quok*", "**quokka**"),
        ('"zanzibar quokka"', "**zanzibar** **quokka**"),
        ("body:zanzibar AND quokka", "**zanzibar** **quokka**"),
    ],
)
def test_the_window_marks_what_the_query_matched(big_vault: apsw.Connection, query: str, marked: str) -> None:
    assert marked in excerpts(big_vault, query)["Huge"]


def test_a_scoped_search_takes_the_window_too(big_vault: apsw.Connection) -> None:
    vault_id = value(big_vault, "SELECT id FROM vaults")
    assert "**zanzibar** quokka met" in excerpts(big_vault, "zanzibar", vault_id=vault_id)["Huge"]


def test_the_search_reads_a_window_not_the_whole_note(big_vault: apsw.Connection, db_path: Path) -> None:
    size = value(big_vault, "SELECT length(CAST(body AS BLOB)) FROM notes WHERE title = 'Huge'")
    assert size > 40 * SNIPPET_MAX_BYTES
    vfs = _CountingVFS()
    conn = apsw.Connection(str(db_path), vfs="kms-counting")
    try:
        assert excerpts(conn, "met", limit=1)  # warm: the schema and the FTS index's own pages
        before = vfs.read[0]
        assert "**met**" in excerpts(conn, "met", limit=1)["Huge"]
        read = vfs.read[0] - before
    finally:
        conn.close()
        vfs.unregister()
    assert read < size // 4, (read, size)  # a window of the note, not all of it


def test_a_match_at_the_very_end_of_a_large_note(big_vault: apsw.Connection) -> None:
    got = excerpts(big_vault, "closing")["Huge"]
    assert got.startswith("…") and got.rstrip().endswith("**closing** words")
