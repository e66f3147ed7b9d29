"""The page-level reader ``kms repair`` salvages a damaged database with (``server.store.salvage``): on a
healthy file it reads exactly what SQLite reads, and on a damaged one every row on a page still whole."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import apsw
import pytest

from server.store.salvage import salvage


def _make(db: Path, page_size: int = 16384, rows: int = 600) -> None:
    """Every record shape kms stores: a rowid alias, NULLs, negative and large integers, floats, blobs,
    text past one page (overflow chains), a WITHOUT ROWID table, a column added after rows were written."""
    conn = apsw.Connection(str(db))
    conn.execute(f"PRAGMA page_size={page_size}")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL, n INTEGER, x REAL, b BLOB)")
    conn.execute("CREATE TABLE k (key TEXT, part INTEGER, value TEXT, PRIMARY KEY (part, key)) WITHOUT ROWID")
    conn.execute("CREATE TABLE plain (a TEXT, b TEXT)")
    conn.execute("CREATE INDEX t_name ON t(name)")
    with conn:
        for i in range(rows):
            big = "é" * (i * 97 % 40_000) if i % 10 == 0 else "é" * (i % 50)  # some past a page: overflow chains
            conn.execute(
                "INSERT INTO t(id, name, n, x, b) VALUES (?, ?, ?, ?, ?)",
                (
                    i * 3 - 50,
                    f"row {i} {big}",
                    [-(2**63), 2**40 + i, None, 0, 1, -7][i % 6],
                    i / 7,
                    bytes([i % 256]) * (i % 300),
                ),
            )
            conn.execute("INSERT INTO k VALUES (?, ?, ?)", (f"key{i}", i % 5, "v" * (i % 9000)))
            conn.execute("INSERT INTO plain VALUES (?, ?)", (f"a{i}" + "p" * 300, None))
    conn.execute("ALTER TABLE plain ADD COLUMN c TEXT DEFAULT 'later'")
    conn.close()


def _sql_rows(db: Path, table: str) -> list[tuple[Any, ...]]:
    conn = apsw.Connection(str(db))
    try:
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        return sorted(conn.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall(), key=repr)
    finally:
        conn.close()


def _salvaged(db: Path, table: str, cols: list[str]) -> list[tuple[Any, ...]]:
    rows = salvage(db).tables[table].values()
    return sorted((tuple(r.get(c) for c in cols) for r in rows), key=repr)


def _page_of(db: Path, table: str, kind: str) -> list[int]:
    conn = apsw.Connection(str(db))
    try:
        return [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = ?", (table, kind))]
    finally:
        conn.close()


def _smash(db: Path, pages: list[int], page_size: int = 16384) -> None:
    with open(db, "r+b") as f:
        for n in pages:
            f.seek((n - 1) * page_size)
            f.write(b"\xa5" * page_size)


@pytest.mark.parametrize("page_size", [16384, 4096])
def test_a_healthy_file_reads_exactly_as_sqlite_reads_it(tmp_path: Path, page_size: int) -> None:
    db = tmp_path / "x.db"
    _make(db, page_size)
    got = salvage(db)
    assert got.bad_pages == 0 and got.orphans == 0 and got.schema_read and not got.header_guessed
    assert _salvaged(db, "t", ["id", "name", "n", "x", "b"]) == _sql_rows(db, "t")
    assert _salvaged(db, "k", ["key", "part", "value"]) == _sql_rows(db, "k")
    plain = salvage(db).tables["plain"]  # written before the column was added: it takes its default
    assert len(plain) == 600 and all("c" not in r for r in plain.values())


def test_rows_on_whole_pages_survive_damage_on_both_sides_of_them(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    _make(db)
    leaves = sorted(_page_of(db, "plain", "leaf"))
    assert len(leaves) >= 3
    cells = dict(
        apsw.Connection(str(db)).execute("SELECT pageno, ncell FROM dbstat WHERE name = 'plain' AND pagetype = 'leaf'")
    )
    smashed = [leaves[0], leaves[-1]]  # SQLite reading forwards and backwards stops at these two
    _smash(db, smashed)
    got = salvage(db)
    assert len(got.tables["plain"]) == 600 - sum(cells[n] for n in smashed)
    assert got.damaged["plain"] == 2


def test_leaves_whose_parent_page_is_gone_are_matched_to_their_table_by_shape(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    _make(db)
    root = _page_of(db, "plain", "internal")
    assert len(root) == 1
    _smash(db, root)
    got = salvage(db)
    assert len(got.tables["plain"]) == 600 and got.orphans >= 2
    assert len(got.tables["t"]) == 600  # no leaf of another table was taken for one of these


def test_a_garbage_header_and_a_cut_off_end(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    _make(db, 4096)
    data = db.read_bytes()
    db.write_bytes(b"\x00GARBAGE" * 8 + data[64 : len(data) // 3 // 4096 * 4096])
    got = salvage(db)
    assert got.header_guessed and got.schema_read
    assert 0 < len(got.tables["t"]) < 600 and got.damaged["t"] > 0


def test_committed_wal_frames_are_read_and_freed_pages_are_not(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    _make(db)
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    with conn:
        conn.execute("DELETE FROM t WHERE id >= 0")  # the pages they were on go to the free list
        conn.execute("INSERT INTO plain VALUES ('only in the wal', NULL, 'x')")
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    with conn:
        conn.execute("INSERT INTO plain VALUES ('after the checkpoint', NULL, 'y')")
    copy = tmp_path / "copy.db"  # (the open connection would checkpoint and delete the WAL on close)
    shutil.copyfile(db, copy)
    shutil.copyfile(str(db) + "-wal", str(copy) + "-wal")
    conn.close()
    got = salvage(copy)
    assert {r["a"] for r in got.tables["plain"].values()} >= {
        "only in the wal",
        "after the checkpoint",
    } and got.bad_pages == 0
    assert sorted(got.tables["t"]) == sorted(r[0] for r in _sql_rows(db, "t"))  # no deleted row comes back


def test_with_page_one_gone_the_rows_are_matched_by_the_shape_of_a_healthy_schema(tmp_path: Path) -> None:
    db, healthy = tmp_path / "x.db", tmp_path / "schema.db"
    _make(db)
    shutil.copyfile(db, healthy)
    _smash(db, [1])
    assert salvage(db).tables == {}  # nothing names the tables
    got = salvage(db, fallback_schema=healthy)
    assert not got.schema_read and got.orphans > 0
    assert len(got.tables["t"]) == 600 and len(got.tables["plain"]) == 600
