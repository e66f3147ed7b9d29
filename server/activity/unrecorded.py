"""Write calls the database could not record (its disk full, or it failed otherwise).

The note such a call touched was put back (``cas.undone_unless_recorded``), so what is owed is an
error row saying the call was refused. It is kept as one JSON line in a small journal next to the
database (``<db>.unrecorded.jsonl``) and written into ``tool_invocations`` by the next write call
that finds room; ``kms doctor`` counts what is still waiting. The journal keeps 64 KiB allocated
(blank lines), so refusals are written into space the file already
owns and still fit on a disk with no byte free; past the reserve a refusal may only be logged. The
reserve is made when a server with writes starts (``ensure_reserve``), not at its first write call:
a disk that fills before that call would leave no room for the reserve.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw

from server.activity import provenance

log = logging.getLogger("kms.writes")
SUFFIX = ".unrecorded.jsonl"
LOW_SPACE_BYTES = 16 * 1024 * 1024  # below this a large write's index update and provenance row may not fit
FIELDS = (
    "tool",
    "session_id",
    "status",
    "input_summary",
    "actor",
    "note_id",
    "vault",
    "path",
    "title",
    "error",
    "message",
    "at",
)


def journal_path(db_path: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(db_path)}{SUFFIX}")


RESERVE_BYTES = 64 * 1024  # kept allocated (newlines), so a refusal still fits when the disk has no room left


@contextlib.contextmanager
def _journal(db_path: str | os.PathLike[str]) -> Iterator[int]:
    """The journal, open and locked (one process at a time), created with its reserve if missing."""
    fd = os.open(journal_path(db_path), os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_size == 0:
            os.pwrite(fd, b"\n" * RESERVE_BYTES, 0)
            os.fsync(fd)
        yield fd
    finally:
        os.close(fd)


def _entries(data: bytes) -> list[dict[str, Any]]:
    found = []
    for line in data.decode("utf-8", "replace").splitlines():
        with contextlib.suppress(ValueError):
            if isinstance(entry := json.loads(line), dict) and entry.get("tool") and entry.get("session_id"):
                found.append({k: v for k, v in entry.items() if k in FIELDS})
    return found


def _read_all(fd: int) -> bytes:
    return os.pread(fd, os.fstat(fd).st_size, 0)


def keep(db_path: str | os.PathLike[str], **row: Any) -> bool:
    """Write one call's row (``provenance.record`` keywords) into the journal's reserve (or after it);
    False if it did not fit even there (then it is only logged)."""
    line = (
        json.dumps(
            {k: v for k, v in row.items() if k in FIELDS} | {"at": row.get("at") or time.time()}, ensure_ascii=False
        ).encode()
        + b"\n"
    )
    try:
        with _journal(db_path) as fd:
            used = len(_read_all(fd).rstrip(b"\n"))
            os.pwrite(fd, line, used + 1 if used else 0)  # over the reserve's newlines: no new blocks needed
            os.fsync(fd)
    except OSError:
        log.exception("a write call could not be recorded, not even in %s: %s", journal_path(db_path), line)
        return False
    return True


def ensure_reserve(db_path: str | os.PathLike[str]) -> None:
    """Make the journal (and its reserve) now, while there is room: ``kms mcp`` with writes on calls it at
    start, and every write call makes sure of it (``replay``)."""
    if not journal_path(db_path).exists():
        with contextlib.suppress(OSError), _journal(db_path):
            pass


def waiting(db_path: str | os.PathLike[str]) -> int:
    """How many calls the journal holds (for ``kms doctor``)."""
    try:
        return len(_entries(journal_path(db_path).read_bytes()))
    except OSError:
        return 0


def replay(conn: apsw.Connection) -> int:
    """Record what the journal holds, then blank it (keeping the reserve); return how many rows. Costs
    an open and a one-byte read when the journal is empty (the common case: every write call asks)."""
    path = journal_path(conn.filename)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        ensure_reserve(conn.filename)
        return 0
    try:
        if os.pread(fd, 1, 0) in (b"\n", b""):
            return 0
    finally:
        os.close(fd)
    with _journal(conn.filename) as jfd:
        data = _read_all(jfd)
        entries, done = _entries(data), 0
        try:
            for entry in entries:
                provenance.record(conn, **entry)
                done += 1
        finally:  # what is still not recorded (no room yet) stays, the rest of the reserve is blanked
            rest = b"".join(json.dumps(e, ensure_ascii=False).encode() + b"\n" for e in entries[done:])
            os.pwrite(jfd, rest + b"\n" * max(0, len(data) - len(rest)), 0)
            os.fsync(jfd)
    return done


def room_report(db_path: str | os.PathLike[str]) -> dict[str, Any]:
    """For ``kms doctor``: free space on the database's disk, the calls still waiting to be recorded,
    and a warning naming what to do when either needs attention."""
    try:
        free: int | None = shutil.disk_usage(Path(db_path).parent).free
    except OSError:
        free = None
    count = waiting(db_path)
    problems = []
    if free is not None and free < LOW_SPACE_BYTES:
        problems.append(
            f"the disk holding the database has {free // 1024} KiB free: writes may be refused "
            "(disk-full) until some space is freed"
        )
    if count:
        problems.append(
            f"{count} refused write call(s) are waiting in {journal_path(db_path)} to be recorded; "
            "the next write call records them once there is room"
        )
    return {"freeBytes": free, "unrecorded": count, "warning": "; ".join(problems) or None}
