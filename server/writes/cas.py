"""Compare-and-swap of one note file: the write path every operation and revert share.

Optimistic concurrency: under a per-note lock the file is read, its sha256 (the version
token ``notes.content_hash``) remembered, the new text computed and the hash checked again
just before the atomic replace. A person's editor does not take kms's lock, so when the
file changed meanwhile the edit is recomputed once on the fresh text; a second change is
a ``conflict``. A caller-supplied ``version`` must match exactly (else ``conflict`` at
once, with the current version). Only the computed text changes; the BOM and the line
endings stay as they were.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from server.errors import KmsError
from server.index.records import record_of_bytes
from server.store.locks import file_lock
from server.vault.files import (
    PendingWrite,
    TextFormat,
    decode,
    encode,
    sha256_hex,
    write_failure,
)
from server.vault.markdown import line_count
from server.vault.paths import is_note_path, open_folder
from server.vault.registry import Vault
from server.vault.saves import file_stamp, open_for_writing, read_stamp, write_stamp
from server.writes import once, reindex
from server.writes.context import Landed, NoteRef, WriteContext
from server.writes.crash_points import crash_point
from server.writes.outcome import Edit, WriteOutcome, WriteResult
from server.writes.reindex import Wrote
from server.writes.unit_journal import Entry, UnitJournal, recover

log = logging.getLogger("kms.writes")


def remove_created(vault: Vault, folder_path: Path, real_folder: str, name: str, data: bytes, lock_dir: Path) -> None:
    """Take back a create: the new note goes only while it still holds exactly what kms wrote."""
    folder = "" if real_folder == "." else real_folder
    with file_lock(folder_path / name.casefold(), lock_dir), _folder_of(vault, f"{folder}/{name}") as fd:
        try:
            f = os.open(name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=fd)
        except FileNotFoundError:
            return
        with os.fdopen(f, "rb") as fh:
            if fh.read() != data:
                return  # a person already wrote into it: theirs now
        os.unlink(name, dir_fd=fd)


def put_back(vault: Vault, real: Path, real_rel: str, old: bytes, written: str, lock_dir: Path | None) -> None:
    """Swap ``old`` back in over kms's own version (sha256 ``written``) only: never over a newer save.
    ``lock_dir`` None: the caller holds the file's lock (a unit of several files)."""
    locked = file_lock(real, lock_dir) if lock_dir is not None else contextlib.nullcontext(None)
    with locked as lock_fd, _folder_of(vault, real_rel) as dir_fd, PendingWrite(real, old, dir_fd=dir_fd) as pending:
        done = pending.commit_if_unchanged(written, old)
        if done is None:  # no atomic exchange here: check, then rename
            if sha256_hex(_read_bytes(real)) != written:
                return
            pending.commit()
        elif not done:
            return
        if lock_fd is not None:
            write_stamp(lock_fd, pending.stamp)
    pending.wait_durable()


def _read_bytes(path: Path) -> bytes:
    with contextlib.suppress(FileNotFoundError):
        return path.read_bytes()
    return b""


# ----- the write path ---------------------------------------------------------------------------


QUIET_S = 0.05
MAX_SETTLE_S = 1.0
FORCED_QUIET_S = 0.02  # a note read without settling must then stay unchanged this long
GIVE_UP_S = 5.0


def _stable_read(real: Path, note: NoteRef, lock_fd: int) -> bytes:
    """Read the note once nobody seems to be in the middle of saving it.

    Editors that save by truncate-then-write expose an empty (or, for big files, a
    half-written) file for a moment; if kms read that state and the editor stalled
    until kms's re-check, kms would "append" to the fragment and the editor's bytes
    would go to the replaced inode: the note's content lost. So a read counts only if
    the file did not change across it and its mtime is ``QUIET_S`` old; a version kms
    wrote itself (stamped in the lock file) needs no wait, so agents appending in turn
    are not slowed down. A file that never settles (someone saving continuously) is
    read after ``MAX_SETTLE_S`` if it then stays unchanged for ``FORCED_QUIET_S`` (a save in
    chunks is seen moving between them); an empty file the index
    knows as non-empty only once it has been empty that long. A file another process holds open for
    writing (``saves.open_for_writing``: a save in progress, stalled however long) is not read until it
    is closed; the exchange checks that again (``PendingWrite.commit_if_unchanged``). After ``GIVE_UP_S``
    the write is refused as a conflict.
    """
    started = time.monotonic()
    while True:
        try:
            st = os.stat(real)
        except FileNotFoundError:
            return _read(real, note)
        stamp = f"{st.st_ino} {st.st_mtime_ns} {st.st_size}"
        age = time.time() - st.st_mtime_ns / 1e9
        waited = time.monotonic() - started
        settled = age >= QUIET_S or age < -2.0  # far in the future: clock skew, not a save in progress
        if st.st_size == 0 and note.size_bytes > 0:  # emptied: on purpose long ago, or a save in progress?
            ready = age >= MAX_SETTLE_S
        else:
            ready = settled or waited >= MAX_SETTLE_S
        own = read_stamp(lock_fd) == stamp
        if ready and not own and open_for_writing(str(real)):  # a save in progress, however long it stalls
            ready = False
        if ready or own:
            raw = _read(real, note)
            if not (settled or own):  # read only because it never settles: a save may be mid-way
                time.sleep(FORCED_QUIET_S)  # (a save in two chunks pauses between them: see it move)
            try:
                again = file_stamp(real)
            except FileNotFoundError:  # gone (or its folder swapped) right after the read: look again
                continue
            if again == stamp and len(raw) == st.st_size:
                return raw
            continue
        if waited >= GIVE_UP_S:
            raise KmsError(
                "conflict",
                "the note is being saved continuously by someone else (or another program holds it open for "
                "writing); try again in a moment",
                noteId=note.id,
            )
        time.sleep(min(max(QUIET_S - age, 0.005), QUIET_S))


def _read(real: Path, note: NoteRef) -> bytes:
    try:
        with open(real, "rb") as f:
            return f.read()
    except FileNotFoundError as e:
        message = f"the file of note {note.path!r} is gone; re-index the vault"
        raise KmsError("not-found", message, noteId=note.id) from e
    except IsADirectoryError as e:
        raise KmsError("invalid-input", f"{note.path!r} is a folder, not a note") from e


@contextlib.contextmanager
def _folder_of(vault: Vault, real_rel: str) -> Iterator[int]:
    """The note's folder, opened without following links (``paths.open_folder``): the temp file
    and the rename happen in it even if its name is swapped for a link meanwhile."""
    fd = open_folder(vault.root, real_rel.rpartition("/")[0])
    try:
        yield fd
    finally:
        os.close(fd)


def write_note(
    ctx: WriteContext,
    vault: Vault,
    note: NoteRef,
    compute: Callable[[str, TextFormat], Edit],
    *,
    version: str | None = None,
) -> WriteOutcome:
    """Read -> compute -> re-check -> atomic replace, with optimistic concurrency; the index follows through
    ``reindex.note`` (once the call's operation returns). In a preview (``ctx.capture``) the new bytes are
    recorded and nothing is written."""
    if version is not None and (not isinstance(version, str) or not re.fullmatch(r"[0-9a-f]{64}", version)):
        raise KmsError("invalid-input", "version must be the 64-hex content hash returned by kms_read")
    lock_dir = ctx.lock_dir
    real, real_rel = ctx.place(vault, note.path)  # the session's reach, where the note really is
    preview = False
    journal: UnitJournal | None = None  # a keyed call's (``once``): none for any other
    with contextlib.ExitStack() as locks:
        lock_fd = locks.enter_context(file_lock(real, lock_dir))
        dir_fd = locks.enter_context(_folder_of(vault, real_rel))
        recover(ctx.conn, lock_dir, held=[str(real)])  # a dead unit over this note goes first
        for _attempt in range(2):
            raw = _stable_read(real, note, lock_fd)
            before = sha256_hex(raw)
            if version is not None and before != version:
                raise KmsError(
                    "conflict",
                    "the note changed since that version was read; read it again and retry",
                    noteId=note.id,
                    currentVersion=before,
                    expectedVersion=version,
                )
            text, fmt = decode(raw)
            edit = compute(text, fmt)
            new_raw = raw if edit.new_text == text else encode(edit.new_text, fmt)
            if preview := ctx.shown(vault.name, note.path, raw, new_raw):  # staged for approval: not written
                break
            if new_raw == raw:
                break
            intent = once.start(ctx, [Entry(str(real), raw, new_raw)])  # a keyed call's journal, flushed...
            try:
                with PendingWrite(real, new_raw, dir_fd=dir_fd) as pending:  # ...as this is, in the background...
                    written = record_of_bytes(
                        note.path,
                        pending.mtime_ns,
                        new_raw,  # ...while it is parsed
                        dialect=vault.rules,
                    )
                    journal = intent.wait()
                    committed = pending.commit_if_unchanged(before, new_raw)  # never over a version not read
                    if committed is None:  # no atomic exchange here: check, then rename (a window of µs)
                        if sha256_hex(_read(real, note)) != before:
                            once.forget(journal)
                            continue
                        pending.commit()
                    elif not committed:
                        once.forget(journal)
                        continue  # someone outside kms saved the file meanwhile: recompute on the fresh text
                    crash_point("write.landed")
                    write_stamp(lock_fd, pending.stamp)
            except OSError as e:
                raise write_failure(e, note.path) from None
            finally:
                intent.drop_unless_waited()
            break
        else:
            raise KmsError(
                "conflict",
                "the note kept changing while kms was writing it; read it again and retry",
                noteId=note.id,
                currentVersion=sha256_hex(_read(real, note)),
            )
        if not preview and new_raw != raw:
            intent.hold_until_recorded(locks)
    after = sha256_hex(new_raw)
    if preview:
        return WriteOutcome(
            WriteResult(noteId=note.id, title=note.title, path=note.path, vault=vault.name, changed=new_raw != raw),
            edit.change,
            hash_before=before,
            hash_after=after,
        )
    result = WriteResult(
        title=note.title,
        path=note.path,
        vault=vault.name,
        bytesBefore=len(raw),
        bytesAfter=len(new_raw),
        linesAdded=line_count(edit.new_text) - line_count(text),
        version=after,
        changed=new_raw != raw,
    )
    result["noteId"] = note.id
    if new_raw != raw:
        ctx.landed.append(Landed(vault, real_rel, raw, new_raw))  # (a vault in git mode commits it)
        undo = partial(put_back, vault, real, real_rel, raw, after, lock_dir)
        durable = [pending.wait_durable, intent.recorded]  # (the folder's fsync runs while the rows are written)
        if real_rel != note.path and is_note_path(real_rel):  # the symlink's target is a note of its own
            reindex.note(ctx, Wrote(vault, note.path, written, result, keep_id=True), undo)
            reindex.note(ctx, Wrote(vault, real_rel, None, result, sets_id=False, then=durable), lambda: None)
        else:
            reindex.note(ctx, Wrote(vault, note.path, written, result, keep_id=True, then=durable), undo)
    return WriteOutcome(result, edit.change if new_raw != raw else None, hash_before=before, hash_after=after)
