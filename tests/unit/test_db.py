"""The database helpers: write transactions alone and grouped under one commit."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from server.store.db import after_commit, at_group_end, connect, shared_commit, write_tx


def _setup(tmp_path: Path) -> tuple[apsw.Connection, apsw.Connection]:
    a, b = connect(tmp_path / "kms.db"), connect(tmp_path / "kms.db")
    a.execute("CREATE TABLE t (x INTEGER)")
    return a, b


def _xs(conn: apsw.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT x FROM t ORDER BY x")]


def test_blocks_in_a_group_commit_together_at_its_end(tmp_path: Path) -> None:
    a, b = _setup(tmp_path)
    with shared_commit(a):
        with write_tx(a):
            a.execute("INSERT INTO t VALUES (1)")
        with write_tx(a):
            a.execute("INSERT INTO t VALUES (2)")
        assert a.in_transaction and _xs(b) == []  # not committed yet: one commit for both
    assert not a.in_transaction and _xs(b) == [1, 2]


def test_after_commit_runs_once_the_groups_commit_is_done(tmp_path: Path) -> None:
    a, b = _setup(tmp_path)
    seen: list[list[int]] = []
    with shared_commit(a):
        with write_tx(a):
            a.execute("INSERT INTO t VALUES (1)")
            after_commit(a, lambda: seen.append(_xs(b)))  # what another connection sees by then
        assert seen == []
    assert seen == [[1]]


def test_after_commit_is_dropped_when_nothing_is_committed(tmp_path: Path) -> None:
    a, _b = _setup(tmp_path)
    seen: list[str] = []
    with shared_commit(a):
        with write_tx(a):
            a.execute("INSERT INTO t VALUES (1)")
            after_commit(a, lambda: seen.append("ran"))
        a.execute("ROLLBACK")  # (what SQLite itself does to a transaction a full disk breaks)
    with shared_commit(a):
        pass
    assert seen == []


def test_at_group_end_runs_after_the_commit_and_also_when_it_fails(tmp_path: Path) -> None:
    a, b = _setup(tmp_path)
    seen: list[str] = []
    with shared_commit(a):
        with write_tx(a):
            a.execute("INSERT INTO t VALUES (1)")
        at_group_end(a, lambda: seen.append(f"end {_xs(b)}"))
        after_commit(a, lambda: seen.append("committed"))
    assert seen == ["committed", "end [1]"]
    seen.clear()
    a.execute("CREATE TABLE p (id INTEGER PRIMARY KEY)")
    a.execute("CREATE TABLE c (pid INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)")
    with pytest.raises(apsw.ConstraintError), shared_commit(a):
        with write_tx(a):
            a.execute("INSERT INTO c VALUES (99)")  # checked at COMMIT, which then fails
        at_group_end(a, lambda: seen.append("end"))
        after_commit(a, lambda: seen.append("committed"))
    a.execute("ROLLBACK")
    assert seen == ["end"]
    at_group_end(a, lambda: seen.append("no group: at once"))
    assert seen == ["end", "no group: at once"]


def test_the_group_takes_the_lock_only_at_its_first_write(tmp_path: Path) -> None:
    a, b = _setup(tmp_path)
    with shared_commit(a):
        assert not a.in_transaction  # work before the first write (file I/O) holds no lock
        with write_tx(b):  # so another connection can write meanwhile
            b.execute("INSERT INTO t VALUES (7)")
        with write_tx(a):
            a.execute("INSERT INTO t VALUES (8)")
    assert _xs(b) == [7, 8]


def test_a_failed_block_rolls_back_alone_and_completed_work_is_kept(tmp_path: Path) -> None:
    a, b = _setup(tmp_path)
    with pytest.raises(RuntimeError), shared_commit(a):
        with write_tx(a):
            a.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(ValueError), write_tx(a):
            a.execute("INSERT INTO t VALUES (2)")
            raise ValueError("this block fails")
        with write_tx(a):
            a.execute("INSERT INTO t VALUES (3)")
        raise RuntimeError("after the writes")  # what completed was already atomic: it stays
    assert _xs(b) == [1, 3]
    with write_tx(a):  # and the connection is back to plain transactions
        a.execute("INSERT INTO t VALUES (4)")
    assert _xs(b) == [1, 3, 4]


def test_a_failed_first_block_leaves_no_transaction_open(tmp_path: Path) -> None:
    a, b = _setup(tmp_path)
    with shared_commit(a):
        with pytest.raises(ValueError), write_tx(a):
            a.execute("INSERT INTO t VALUES (1)")
            raise ValueError("fails")
        assert not a.in_transaction
    assert _xs(b) == []


def test_nested_groups_commit_once_at_the_outer_end(tmp_path: Path) -> None:
    a, b = _setup(tmp_path)
    with shared_commit(a):
        with shared_commit(a), write_tx(a):
            a.execute("INSERT INTO t VALUES (1)")
        assert _xs(b) == []
    assert _xs(b) == [1]


def test_new_databases_use_large_pages_and_old_ones_keep_theirs(tmp_path: Path) -> None:
    new = connect(tmp_path / "new.db")
    assert next(new.execute("PRAGMA page_size"))[0] == 16384
    assert next(new.execute("PRAGMA journal_mode"))[0] == "wal"
    raw = apsw.Connection(str(tmp_path / "old.db"))  # a database made before kms chose its page size
    raw.execute("PRAGMA page_size=4096")
    raw.execute("CREATE TABLE keep (x)")
    raw.execute("INSERT INTO keep VALUES (42)")
    raw.close()
    old = connect(tmp_path / "old.db")
    assert next(old.execute("PRAGMA page_size"))[0] == 4096
    assert next(old.execute("SELECT x FROM keep"))[0] == 42


def _fts_config(conn: apsw.Connection) -> dict:
    return dict(conn.execute("SELECT k, v FROM notes_fts_config"))


def test_fts_leaves_fill_a_page_and_bulk_loads_buffer_16_mib(tmp_path: Path) -> None:
    new = connect(tmp_path / "new.db")
    assert _fts_config(new)["pgsz"] == 16384 - 64
    assert _fts_config(new)["hashsize"] == 16 * 1024 * 1024
    raw = apsw.Connection(str(tmp_path / "old.db"))
    raw.execute("PRAGMA page_size=4096")
    raw.execute("CREATE TABLE keep (x)")  # the page size is fixed by the first write
    raw.close()
    old = connect(tmp_path / "old.db")
    assert "pgsz" not in _fts_config(old)  # FTS5's default already fits a 4 KiB page
    assert _fts_config(old)["hashsize"] == 16 * 1024 * 1024
