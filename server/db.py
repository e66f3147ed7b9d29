"""The one way to open the kms SQLite database.

Several processes (agent sessions, a watcher, the dashboard) open the same file,
so every connection uses WAL, a generous busy timeout, and write transactions
that take the write lock up front (``BEGIN IMMEDIATE``): a reader never upgrades
to a writer mid-transaction, which is what produces "database is locked".
APSW connections must not be shared across threads: use ``thread_connection``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import apsw

from server.migrations import migrate

BUSY_TIMEOUT_MS = 30_000
_local = threading.local()


def default_db_path() -> Path:
    """``$KMS_DB_PATH`` or ``<platform data dir>/kms.db``."""
    env = os.environ.get("KMS_DB_PATH")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("kms", appauthor=False)) / "kms.db"


def connect(path: str | Path | None = None, *, readonly: bool = False, migrate_schema: bool = True) -> apsw.Connection:
    """Open (and migrate) the database; ``:memory:`` works for tests."""
    target = str(path if path is not None else default_db_path())
    if target != ":memory:":
        Path(target).parent.mkdir(parents=True, exist_ok=True)
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    conn = apsw.Connection(target, flags=flags)
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    if not readonly:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA temp_store=MEMORY")
    conn.execute("PRAGMA cache_size=-32000")
    if migrate_schema and not readonly:
        migrate(conn)
    return conn


def thread_connection(path: str | Path | None = None) -> apsw.Connection:
    """A connection owned by the calling thread (cached per thread and path)."""
    key = str(path if path is not None else default_db_path())
    cache: dict[str, apsw.Connection] = getattr(_local, "conns", None) or {}
    _local.conns = cache
    conn = cache.get(key)
    if conn is None:
        conn = cache[key] = connect(key)
    return conn


@contextlib.contextmanager
def write_tx(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """A write transaction that takes the lock first (BEGIN IMMEDIATE)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


@contextlib.contextmanager
def read_tx(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """A consistent snapshot for several reads."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def rows(conn: apsw.Connection, sql: str, params: tuple | dict = ()) -> list[dict]:
    """Run a query and return dict rows (column name -> value)."""
    cur = conn.execute(sql, params)
    out = []
    desc = None
    for row in cur:
        if desc is None:
            desc = [d[0] for d in cur.get_description()]
        out.append(dict(zip(desc, row, strict=True)))
    return out


def scalar(conn: apsw.Connection, sql: str, params: tuple | dict = ()):
    """First column of the first row, or None."""
    for row in conn.execute(sql, params):
        return row[0]
    return None
