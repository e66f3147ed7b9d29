"""The write-ahead journal of a unit that rewrites several notes in place (a rename's linking notes).

Why in place: replacing each of 500 linking notes through a temp file creates and frees 500 inodes,
which on some file systems costs more than the whole rewrite, and every note would lose what lives on
its inode: its creation time (Obsidian's "created" order on macOS), its extended attributes. (A note
with other hard links is replaced all the same: a name outside the vault must not change with it.)
So kms rewrites a linking note as an editor saves it, in place, and stays crash-safe the way SQLite's
rollback journal does: before the first note is touched, the old and the new bytes of every file of
the unit are in one journal file kept with kms's lock files, flushed, name included. The journal
holds an ``flock`` for as long as its writer lives, and goes right after the database commit that
records the unit (which also records the journal's token in ``applied_units``).

``recover`` (at every write call and at a server's start) finishes what a dead writer left: a journal
whose token was committed is deleted; otherwise every note of it that holds the new bytes, or a mix
of old and new blocks (a crash in mid-write), gets its old bytes back, so the unit is undone as a
whole. A note a person saved since is never written over: the journal is then kept (``*.kept``) and
``kms doctor`` names it.

The journal is ``<db dir>/locks/units/<token>.unit``, written as ``.writing`` and then renamed, so a
half-written journal is never taken for one. The unit's file locks are held until the commit that
records it (``store.db.at_group_end``), and the journal is deleted right after that commit
(``store.db.after_commit``): no other writer can write on one of its notes before the unit is
recorded. A writer that takes the lock of a note a dead unit let go finishes that unit first
(``recover(held=...)``), so its text never lands on a half-written note.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from server.errors import KmsError
from server.store.db import write_tx
from server.store.locks import file_lock
from server.vault.files import atomic_write, fsync_dir

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("kms.writes")
MAGIC = b"KMSUNIT1\n"
BLOCK = 4096  # a crash in mid-write leaves each page old or new (the torn states ``_ours`` accepts)
SUFFIX, KEPT, WRITING = ".unit", ".kept", ".writing"
NO_LOCK_AGE_S = 600.0
# A writer creates its ``.writing`` journal a moment before it locks it (``begin``): in that moment, empty and
# unlocked, it looks like a dead writer's to another process's ``recover``, which removed it under the writer
# (found by 14 hosts' sessions writing at once: tests/e2e/test_host_entries_e2e.py). A writer writes only once
# it holds the lock, so an unlocked journal with bytes in it is a dead writer's; an empty one only this old.
WRITING_AGE_S = 60.0


def journal_dir(lock_dir: Path) -> Path:
    """The journals live with the lock files: kms-private, next to the database (or in the private
    temp folder of a database with no file)."""
    return lock_dir / "units"


@dataclass(frozen=True)
class Entry:
    """One note of a unit: its real path, the bytes kms read and the bytes it writes (at ``dest`` when it
    moves; none when it is ``deleted``: the revert of a note kms created; ``created``: a new note, no old
    bytes, undone by removing it)."""

    path: str
    old: bytes
    new: bytes
    dest: str | None = None
    deleted: bool = False
    created: bool = False


class UnitJournal:
    """A live unit's journal: written and flushed by ``begin``, held locked until ``end``."""

    def __init__(self, path: Path, fd: int, token: str) -> None:
        self.path, self._fd, self.token = path, fd, token

    @classmethod
    def begin(cls, folder: Path, entries: list[Entry], call: str | None = None, attempt: int = 0) -> UnitJournal:
        """Write the journal (``call``: the keyed write call it is for, ``server.writes.once``), flushed, name
        included, before the first note is touched. Between its creation and its lock a ``recover`` may take
        it for the half-written journal of a dead writer and remove it: then it is made again."""
        folder.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(12)
        path, writing = folder / f"{token}{SUFFIX}", folder / f"{token}{WRITING}"
        fd = os.open(writing, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)  # held while this writer lives: ``recover`` leaves it alone
                if os.stat(writing).st_ino != os.fstat(fd).st_ino:  # (raises FileNotFoundError when gone)
                    raise FileNotFoundError(errno.ENOENT, "taken for a dead writer's", str(writing))
            data = _encode(token, entries, call)
            with memoryview(data) as view:
                done = 0
                while done < len(view):
                    done += os.write(fd, view[done:])
            os.fsync(fd)
            os.rename(writing, path)  # ``recover`` only ever sees a whole journal
            fsync_dir(folder)  # its name is durable before the first note is touched
        except FileNotFoundError:  # a ``recover`` took it for a dead writer's before it was locked: made again
            os.close(fd)
            if attempt >= 2:
                raise
            return cls.begin(folder, entries, call, attempt + 1)
        except BaseException:
            os.close(fd)
            for name in (writing, path):
                with contextlib.suppress(OSError):
                    os.unlink(name)
            raise
        return cls(path, fd, token)

    def mark_applied(self, conn: apsw.Connection) -> None:
        """Record the token in the unit's own transaction (the caller's ``write_tx``); rows of journals
        that are gone are dropped here too (under the same write lock, so no live unit's row goes)."""
        live = {p.name.removesuffix(SUFFIX) for p in _journals(self.path.parent)}
        stale = [r[0] for r in conn.execute("SELECT token FROM applied_units") if r[0] not in live]
        conn.executemany("DELETE FROM applied_units WHERE token = ?", [(t,) for t in stale])
        conn.execute("INSERT INTO applied_units (token, applied_at) VALUES (?, ?)", (self.token, time.time()))

    def end(self) -> None:
        """The unit is recorded, or undone: the journal goes (also after ``release``)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.release()

    def release(self) -> None:
        """Let go of the journal but leave it on disk: ``recover`` finishes the unit."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


def _encode(token: str, entries: list[Entry], call: str | None = None) -> bytes:
    files = [[e.path, len(e.old), len(e.new), e.dest, e.deleted] for e in entries]
    created = [i for i, e in enumerate(entries) if e.created]  # (a key of its own: an older kms reads the rest)
    header = json.dumps({"token": token, "files": files, "created": created, "call": call}, ensure_ascii=False).encode(
        "utf-8"
    )
    parts = [MAGIC, len(header).to_bytes(8, "big"), header]
    for e in entries:
        parts += [e.old, e.new]
    body = b"".join(parts)
    return body + hashlib.sha256(body).digest()


def _header(data: bytes) -> tuple[dict[str, Any], bytes, int] | None:
    """The header, the body and where the files' bytes start; None for a journal cut short (its writer died
    writing it: no note was touched yet) or not kms's."""
    body, digest = data[:-32], data[-32:]
    if not body.startswith(MAGIC) or hashlib.sha256(body).digest() != digest:
        return None
    at = len(MAGIC)
    size = int.from_bytes(body[at : at + 8], "big")
    return json.loads(body[at + 8 : at + 8 + size]), body, at + 8 + size


def _decode(data: bytes) -> tuple[str, list[Entry]] | None:
    """The token and entries, or None for a journal cut short or not kms's (``_header``)."""
    parsed = _header(data)
    if parsed is None:
        return None
    header, body, at = parsed
    entries = []
    created = set(header.get("created", ()))  # (none in a journal of an older kms)
    for i, (path, n_old, n_new, dest, deleted) in enumerate(header["files"]):
        old, new = body[at : at + n_old], body[at + n_old : at + n_old + n_new]
        entries.append(Entry(path, old, new, dest, deleted, i in created))
        at += n_old + n_new
    return str(header["token"]), entries


def _journals(folder: Path, suffixes: tuple[str, ...] = (SUFFIX,)) -> list[Path]:
    """The folder's journals with these suffixes, in name order (one listing: this runs at every write)."""
    try:
        return sorted(p for p in folder.iterdir() if p.name.endswith(suffixes))
    except FileNotFoundError:
        return []


def kept(lock_dir: Path) -> list[dict[str, Any]]:
    """The journals ``recover`` could not finish (a note of theirs was saved since), each with the notes
    it names: for ``kms doctor``. Each note's text from before the unit is still in its journal."""
    folder = journal_dir(lock_dir)
    out = []
    for path in sorted(folder.glob(f"*{KEPT}")) if folder.is_dir() else []:
        parsed = _decode(path.read_bytes())
        out.append({"journal": str(path), "notes": [e.dest or e.path for e in parsed[1]] if parsed else []})
    return out


def kept_calls(lock_dir: Path) -> set[str]:
    """The keyed write calls (``server.writes.once``) whose journal ``recover`` had to keep: whether they
    landed is unknown, so their retries are refused. One listing when there is none (the common case)."""
    out = set()
    for path in _journals(journal_dir(lock_dir), (KEPT,)):
        parsed = _header(path.read_bytes())
        if parsed is not None and isinstance(call := parsed[0].get("call"), str):
            out.add(call)
    return out


def recover(conn: apsw.Connection, lock_dir: Path, held: Iterable[str] = ()) -> int:
    """Finish every unit whose writer is gone; returns how many. Cheap when there is none (one listing).

    ``held``: the notes (real paths) whose locks the caller already holds, a writer that has just taken
    them: a dead unit that names one of them is finished first (its writer's death is what let the lock
    go), so the caller never writes over a half-written note; a dead unit that names none of them is
    left for the next call. ``conflict`` if its other notes stay locked."""
    done = 0
    held = frozenset(held)
    folder = journal_dir(lock_dir)
    for path in _journals(folder, (WRITING, SUFFIX)):
        with _if_dead(path) as fd:
            if fd is None:
                continue
            if path.name.endswith(WRITING):  # its writer died writing it (no note was touched), or is starting
                seen = os.fstat(fd)
                if seen.st_size > 0 or time.time() - seen.st_mtime >= WRITING_AGE_S:
                    with contextlib.suppress(FileNotFoundError):  # (or it was whole and went since)
                        os.unlink(path)
            else:
                done += _finish(conn, path, fd, lock_dir, held)
    return done


@contextlib.contextmanager
def _if_dead(path: Path) -> Iterator[int | None]:
    """The journal, opened and locked, if its writer is gone; else None."""
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        yield None  # its writer ended it just now
        return
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield None  # a live unit
                return
        elif time.time() - os.fstat(fd).st_mtime < NO_LOCK_AGE_S:
            yield None  # (no flock here: a unit takes seconds at most, so only an old journal is a dead one's)
            return
        yield fd
    finally:
        os.close(fd)


def _finish(conn: apsw.Connection, path: Path, fd: int, lock_dir: Path, held: frozenset[str]) -> int:

    with os.fdopen(os.dup(fd), "rb") as fh:
        parsed = _decode(fh.read())
    if parsed is None:  # damaged (a whole journal is renamed into place): kept for the person
        log.warning("a damaged unit journal was kept at %s", path.with_suffix(KEPT))
        os.replace(path, path.with_suffix(KEPT))
        return 1
    token, entries = parsed
    targets = sorted({p for e in entries for p in (e.path, e.dest) if p})
    if held and held.isdisjoint(targets):
        return 0
    with contextlib.ExitStack() as stack:
        for target in targets:  # the writer's order: the files first, then the database
            if target in held:
                continue
            try:  # (a caller holding locks already must not wait out of order: bounded)
                stack.enter_context(file_lock(target, lock_dir, wait=2.0 if held else None))
            except TimeoutError:
                raise KmsError(
                    "conflict",
                    "a change of several notes that a crash interrupted is being "
                    "undone; nothing was changed: try again",
                ) from None
        with write_tx(conn):
            if not path.exists():
                return 0
            if conn.execute("SELECT 1 FROM applied_units WHERE token = ?", (token,)).fetchall():
                conn.execute("DELETE FROM applied_units WHERE token = ?", (token,))
                with contextlib.suppress(FileNotFoundError):  # (its writer's removal, just now)
                    os.unlink(path)
                return 1
            left = [e.path for e in entries if not undo(e)]
            if left:
                log.warning("a unit kms could not finish was kept at %s: %d notes changed since", path, len(left))
                os.replace(path, path.with_suffix(KEPT))
            else:
                os.unlink(path)
    return 1


def undo(entry: Entry) -> bool:
    """Put the old bytes back where the note holds kms's new bytes or a torn mix (a moved note back at
    its path, a deleted one made again, a created one removed); False where a person saved it since (left as
    it is)."""
    if entry.created:
        return _undo_create(entry)
    if entry.dest is not None or entry.deleted:
        return _undo_move(entry)
    try:
        fd = os.open(entry.path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return False
    try:
        current = read_all(fd)
        if current == entry.old:
            return True
        if not _ours(current, entry.old, entry.new):
            return False
        write_all(fd, entry.old)
        os.fsync(fd)
        return True
    finally:
        os.close(fd)


def _undo_create(entry: Entry) -> bool:
    """A note kms created goes while it holds exactly kms's bytes (it is made whole, by a rename)."""
    try:
        with open(entry.path, "rb") as fh:
            if fh.read() != entry.new:
                return False  # a person wrote into it since: theirs now
    except FileNotFoundError:
        return True  # never made
    os.unlink(entry.path)
    return True


def _undo_move(entry: Entry) -> bool:
    """A move creates the destination, then removes the source (a delete only removes it): undone the
    other way round, each step only over kms's own bytes."""
    source = Path(entry.path)
    dest = Path(entry.dest) if entry.dest and os.path.lexists(entry.dest) else None  # (if it got there)
    if dest is not None and os.path.lexists(source) and os.path.samefile(source, dest):
        return True  # a case-only rename on a case-insensitive disk: one file, left as it is
    if dest is not None and dest.read_bytes() != entry.new:
        return False  # a person saved the moved note since: theirs stays where it is
    if not os.path.lexists(source):
        source.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(source, entry.old, create_only=True)
    elif source.read_bytes() != entry.old:
        return False  # a new note took its name since
    if dest is not None:
        os.unlink(dest)
    return True


def _ours(current: bytes, old: bytes, new: bytes) -> bool:
    """The new bytes, or what writing them over the old ones from the start can leave when it stops
    (a write cut short: the new bytes up to some point, the old ones after it; a crash: each 4 KiB
    block in either state, or cut short inside)."""
    if current == new:
        return True
    if not min(len(old), len(new)) <= len(current) <= max(len(old), len(new)):
        return False  # (the file is cut to the new length only once the new bytes are all written)
    for at in range(0, len(current), BLOCK):
        block = current[at : at + BLOCK]
        cut = len(os.path.commonprefix([block, new[at : at + len(block)]]))
        if block[cut:] != old[at + cut : at + len(block)]:
            return False
    return True


def read_all(fd: int) -> bytes:
    """The whole file behind ``fd``, from its start."""
    chunks, at = [], 0
    while chunk := os.pread(fd, max(os.fstat(fd).st_size - at, 0) + 65_536, at):
        chunks.append(chunk)
        at += len(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    """Make the file behind ``fd`` exactly ``data``, in place (same inode)."""
    with memoryview(data) as view:
        done = 0
        while done < len(view):
            done += os.pwrite(fd, view[done:], done)
    os.ftruncate(fd, len(data))
