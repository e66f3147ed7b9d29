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
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import apsw
from platformdirs import user_data_dir

from server.errors import KmsError
from server.store.health import UNUSABLE, database_error
from server.store.migrations import migrate
from server.store.registrations import restore_registrations

BUSY_TIMEOUT_MS = 30_000
PAGE_SIZE = 16_384
_local = threading.local()


def data_dir() -> Path:
    """kms's platform data dir: the default database's folder, and the installed model's whatever
    ``KMS_DB_PATH`` says (a model belongs to the person, not to one database)."""

    return Path(user_data_dir("kms", appauthor=False))


def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    """``$KMS_DB_PATH`` (of ``env``, default the process's) or ``<platform data dir>/kms.db``."""
    given = (os.environ if env is None else env).get("KMS_DB_PATH")
    if given:
        return Path(given).expanduser()
    return data_dir() / "kms.db"


def service_folder(db_path: Path) -> Path:
    """The private folder (0700) of one database's service: its state file, log and host secrets.
    ``kms.db`` keeps ``<its folder>/service`` (where it has always been); another database in the same
    folder gets ``service-<its name>``, so two databases side by side never share a service or a secret."""
    db_path = Path(db_path)
    name = "service" if db_path.name == "kms.db" else f"service-{db_path.stem}"
    folder = db_path.parent / name
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def connect(path: str | Path | None = None, *, readonly: bool = False, migrate_schema: bool = True) -> apsw.Connection:
    """Open (and migrate) the database; ``:memory:`` works for tests. A damaged or unreachable
    database raises ``KmsError("database", ...)`` saying what to do (``server/store/health.py``)."""
    target = str(path if path is not None else default_db_path())
    try:
        return _connect(target, readonly=readonly, migrate_schema=migrate_schema)
    except (*UNUSABLE, OSError) as e:
        raise database_error(e, target) from None


def check_database(path: str | Path) -> KmsError | None:
    """``kms doctor``: the database opens and SQLite's quick check finds no damage. It lives here, not
    in ``health``, so the import goes one way: opening a database needs ``health``'s rules, never
    the reverse."""
    if not Path(path).exists():
        return None  # created on first use
    try:
        conn = connect(path)
    except KmsError as e:
        return e
    try:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
        if rows and rows[0][0] != "ok":
            return database_error(apsw.CorruptError(str(rows[0][0])), path)
        return None
    except UNUSABLE as e:
        return database_error(e, path)
    finally:
        conn.close()


def _connect(target: str, *, readonly: bool, migrate_schema: bool) -> apsw.Connection:
    fresh = False
    if target != ":memory:":
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        fresh = not os.path.exists(target) or not os.path.getsize(target)
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    conn = apsw.Connection(target, flags=flags)
    try:
        _configure(conn, readonly=readonly, migrate_schema=migrate_schema)
        if fresh and migrate_schema and not readonly:  # a lost database: its vaults are registered again
            restore_registrations(conn)
    except BaseException:
        conn.close()
        raise
    return conn


WAL_SIZE_LIMIT = 64 * 1024 * 1024


def checkpoint_and_truncate(conn: apsw.Connection) -> None:
    """Fold the WAL into the database and truncate it to nothing, after a bulk write (a cold index) left
    it as large as the database; a reader still in the WAL just leaves it for the next checkpoint."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def _configure(conn: apsw.Connection, *, readonly: bool, migrate_schema: bool) -> None:
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    if not readonly:
        # only a new, empty database takes it. 16 KiB pages hold a typical note body without overflow
        # pages, so a cold index writes and reads fewer pages; the price is more WAL bytes per small
        # write (fewer but larger pages per commit). The figures: docs/benchmarks.md, "Vault core".
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        _enable_wal(conn)
        # the WAL file keeps the size of its largest transaction (a cold index: as large as the database)
        # unless a limit truncates it when a checkpoint resets it
        conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    # temp_store stays the default: MEMORY slowed every FTS5 "ORDER BY rank" (its sorter)
    conn.execute("PRAGMA cache_size=-32000")
    if migrate_schema and not readonly:
        migrate(conn)


def _enable_wal(conn: apsw.Connection) -> None:
    """Switching a new database to WAL takes an exclusive lock, and SQLite answers "database is
    locked" at once instead of waiting for it (the busy handler does not apply): several processes
    opening a fresh database together would fail, so retry until the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except apsw.BusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


THREAD_CONNECTIONS = 4  # databases one thread keeps open at once (a process serves one; tests open many)


def thread_connection(path: str | Path | None = None) -> apsw.Connection:
    """A connection owned by the calling thread (cached per thread and path). A pool thread that served
    other databases closes the least recently used past ``THREAD_CONNECTIONS``: its cache never holds
    descriptors for databases nobody uses any more."""
    key = str(path if path is not None else default_db_path())
    cache: OrderedDict[str, apsw.Connection] | None = getattr(_local, "conns", None)
    if cache is None:
        cache = _local.conns = OrderedDict()
    conn = cache.get(key)
    if conn is None:
        conn = cache[key] = connect(key)
        while len(cache) > THREAD_CONNECTIONS:
            _old, stale = cache.popitem(last=False)
            with contextlib.suppress(apsw.Error):
                stale.close()
    else:
        cache.move_to_end(key)
    return conn


@contextlib.contextmanager
def write_tx(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """A write transaction that takes the lock first (BEGIN IMMEDIATE).

    Inside ``shared_commit`` it stays atomic on its own (a savepoint once the group's
    transaction is open) but leaves the COMMIT to the group.
    """
    if conn.in_transaction and id(conn) in _groups():
        conn.execute("SAVEPOINT kms_write")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:  # (a full disk may have made SQLite roll the whole transaction back)
                conn.execute("ROLLBACK TO kms_write")
                conn.execute("RELEASE kms_write")
            raise
        conn.execute("RELEASE kms_write")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if id(conn) not in _groups():
        conn.execute("COMMIT")


def _groups() -> set[int]:
    groups: set[int] | None = getattr(_local, "groups", None)
    if groups is None:
        groups = _local.groups = set()
    return groups


@contextlib.contextmanager
def shared_commit(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """Let the ``write_tx`` blocks inside share one COMMIT (a commit costs a WAL append and a lock
    round; a write tool does three). The transaction opens at the first ``write_tx``, so file work
    before it never holds the database lock. What completed is committed even if the code after it
    raises: each block was already atomic on its own, the group only batches the commit."""
    groups = _groups()
    if id(conn) in groups:  # already grouped by a caller
        yield conn
        return
    groups.add(id(conn))
    callbacks, ends = _hooks("after_commit"), _hooks("at_end")
    callbacks[id(conn)], ends[id(conn)] = [], []
    try:
        yield conn
    finally:
        groups.discard(id(conn))
        then, last = callbacks.pop(id(conn), []), ends.pop(id(conn), [])
        try:
            if conn.in_transaction:
                conn.execute("COMMIT")  # (should it fail, ``then`` is dropped: nothing it follows was committed)
                for fn in then:
                    fn()
        finally:
            for fn in last:
                fn()


def _hooks(kind: str) -> dict[int, list[Callable[[], None]]]:
    out: dict[int, list[Callable[[], None]]] | None = getattr(_local, kind, None)
    if out is None:
        out = {}
        setattr(_local, kind, out)
    return out


def after_commit(conn: apsw.Connection, fn: Callable[[], None]) -> None:
    """Run ``fn`` right after the COMMIT of the ``shared_commit`` group open on ``conn`` (which must be
    open), and only if that COMMIT succeeds: a unit's journal goes once the unit is recorded, not before."""
    _hooks("after_commit")[id(conn)].append(fn)


def at_group_end(conn: apsw.Connection, fn: Callable[[], None]) -> None:
    """Run ``fn`` once the ``shared_commit`` group open on ``conn`` has ended, committed or not (after
    the ``after_commit`` ones); at once when no group is open. A unit's file locks are let go there, so
    no other writer touches its notes before the unit is recorded."""
    if id(conn) in _groups():
        _hooks("at_end")[id(conn)].append(fn)
    else:
        fn()


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
