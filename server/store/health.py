"""What is wrong with a database kms cannot use, said once for every front end.

``connect`` turns the failures of opening a damaged or unreachable database into one
``KmsError("database", ...)`` whose message says what is wrong and what to do; a damaged file
found later (a truncated page read mid-command) goes through ``database_error`` as well. The
CLI prints the message as one line with exit code 4, ``kms mcp`` refuses to start with it,
the dashboard shows it, ``kms doctor`` reports it. ``db`` imports these rules and nothing here
imports ``db``: the quick check ``kms doctor`` runs (``db.check_database``) opens a connection, so it
lives there.

A write lock another process holds past the busy timeout is ``database`` too (``problem: busy``), said
in one line; ``kms mcp`` waits for the lock at start (``wait_writable``) and refuses to start with that
line if it never frees. ``was_kms_database`` (kms's schema in the file's first megabyte) is what lets
``kms repair`` act on a file: any other file at ``KMS_DB_PATH`` is left untouched.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import apsw

from server.errors import KmsError

# the damage or refusal classes: a busy or locked database is a wait, not a fault
DAMAGED = (apsw.NotADBError, apsw.CorruptError)
UNUSABLE = (
    *DAMAGED,
    apsw.CantOpenError,
    apsw.ReadOnlyError,
    apsw.PermissionsError,
    apsw.FullError,
    apsw.IOError,
    apsw.AuthError,
)
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# another process held the write lock for the whole busy timeout: said in one line, not a traceback
BUSY = (apsw.BusyError, apsw.LockedError)


def _where(path: Path) -> str:
    """Why a path cannot hold the database file, or "" when nothing on the way explains it."""
    if path.is_dir():
        return f"{path} is a folder, not a database file: point KMS_DB_PATH at a file (e.g. {path / 'kms.db'})"
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"{parent} is a file, so {path} cannot exist: point KMS_DB_PATH elsewhere"
            if not os.access(parent, os.W_OK | os.X_OK):
                return (
                    f"the folder {parent} is not writable, so the database cannot be created or written "
                    "there: make it writable or point KMS_DB_PATH elsewhere"
                )
            return ""
    return ""


# text of kms's first tables, in the schema near the start of every kms database file (even one whose
# 100-byte header was overwritten or whose end was cut off)
_KMS_SCHEMA = (b"CREATE TABLE vaults", b"CREATE TABLE notes")
_SCHEMA_SCAN_BYTES = 1024 * 1024


def was_kms_database(path: str | Path) -> bool:
    """Whether the file is, or was, a kms database: its first megabyte holds kms's schema. A file that
    never was one (a note copied over ``KMS_DB_PATH``) is not kms's to repair or move."""
    try:
        with open(path, "rb") as f:
            head = f.read(_SCHEMA_SCAN_BYTES)
    except OSError:
        return False
    return all(mark in head for mark in _KMS_SCHEMA)


def not_kms_database(path: str | Path) -> KmsError:
    db = Path(path)
    return KmsError(
        "database",
        f"{db} is not a kms database (neither its header nor its schema say so); kms leaves it "
        "untouched: point KMS_DB_PATH at kms's database, or move this file away and kms "
        "starts a new one there",
        path=str(db),
        problem="not-kms",
    )


def database_error(exc: BaseException, path: str | Path) -> KmsError:
    """One clear sentence for a database failure: what is wrong and what to do."""
    db = Path(path)
    repair = f"run `kms repair` to move it aside and rebuild the index from your vaults (database: {db})"
    if isinstance(exc, apsw.NotADBError | apsw.CorruptError) and db.is_file() and not was_kms_database(db):
        return not_kms_database(db)
    if isinstance(exc, apsw.NotADBError):
        return KmsError(
            "database",
            f"the database file is not an SQLite database (damaged or overwritten): {repair}",
            path=str(db),
            problem="not-a-database",
        )
    if isinstance(exc, apsw.CorruptError):
        return KmsError(
            "database",
            f"the database file is damaged (truncated or corrupt): {repair}",
            path=str(db),
            problem="corrupt",
        )
    if isinstance(exc, BUSY):
        return KmsError(
            "database",
            f"the database {db} is busy: another process held its write lock for the whole "
            "wait (a long `kms index` or `kms repair`, or a process that hung); retry once it "
            "has finished",
            path=str(db),
            problem="busy",
        )
    if isinstance(exc, apsw.FullError) or (isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS):
        return KmsError(
            "disk-full",
            f"the disk holding the database is full ({db}): free some space and retry",
            path=str(db),
            problem="disk-full",
        )
    where = _where(db)
    if where:
        return KmsError("database", where, path=str(db), problem="unreachable")
    if isinstance(exc, apsw.ReadOnlyError | apsw.PermissionsError | PermissionError):
        return KmsError(
            "database",
            f"the database {db} is read-only for kms: make the file and its folder "
            "writable or point KMS_DB_PATH elsewhere",
            path=str(db),
            problem="read-only",
        )
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return KmsError(
        "database",
        f"cannot open the database {db} ({detail}): check KMS_DB_PATH and that the "
        "file and its folder are readable and writable",
        path=str(db),
        problem="unreachable",
    )


def wait_writable(conn: apsw.Connection, path: str | Path) -> KmsError | None:
    """Wait (the connection's busy timeout) until no other process holds the write lock: a server
    that starts while one does says so in one line instead of failing at its first write."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except BUSY as e:
        return database_error(e, path)
    except (apsw.ReadOnlyError, apsw.PermissionsError):
        return None  # a read-only database still serves reads; its writes say so when they come
    return None


def is_database_failure(exc: BaseException) -> bool:
    """A failure ``database_error`` can explain (not a bug in kms)."""
    return isinstance(exc, UNUSABLE) or (isinstance(exc, OSError) and not isinstance(exc, apsw.Error))
