"""The one seam from a write to the index: an operation says what it wrote; the index follows here.

A write point (``cas.write_note``, ``operations.create``, ``operations.create_exact``) does not update the
index itself: it hands ``note`` a ``Wrote`` (the vault, the note's path, the record of the bytes it wrote
when it has one, the result whose ``noteId`` the index gives, and what must follow the rows: the wait for
the folder's fsync, a keyed call's journal token) and how to take the change back. In a call that indexes
after its operation (the write guard's, a person's write through ``person.person_write``: their context's
``index_after``) those are kept on the call's ``WriteContext`` and indexed once by ``flush``, when the
operation returns, in the call's one commit, before its provenance row; anywhere else (a test or a
benchmark calling an operation directly) at once. The guarantees stay where they were:

- the bytes are parsed while their file is flushed (``record_of_bytes`` in the write point, as before), and
  the folder's fsync runs while the rows are written: the durability wait (``then``) comes after them;
- durability before the answer: every ``then`` runs before the call is recorded and answered;
- a keyed call's journal token (``once.recorded``) is a ``then``: it goes into the same commit as the rows;
- a database failure (``UNUSABLE``) is raised as it is, so the call's files are put back
  (``context.undone_unless_recorded``); no index is written for a call whose database failed.

A unit of several files (``multifile.apply_plans``) says what it wrote the same way (``unit_landed``, a
``Unit``) and is indexed by the same ``flush``. Its guarantees hold across the seam because the call's
commit group holds them until then: the database's write lock, taken by the unit before its first file
change, is kept by the group's open transaction until its one COMMIT, so the unit's file changes and its
rows are one locked span (the watcher never sees a moved file whose row has not moved with it); its file
locks and its write-ahead journal are let go only when the group ends; its rows are written while its
fsyncs (started by the unit) run, and an fsync that fails takes every file of the unit back (``Unit.failed``)
before the call is answered; the journal's token goes into the same commit as the rows (``Unit.recorded``).

This module imports the single-file indexer (``server.index.incremental``) at its top: nothing in
``kms mcp``'s start-up path imports the write modules before the tool list is written
(``server.mcp.serve`` ``Deferred``), and the dashboard imports them for the person's writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

import apsw

from server.index.incremental import LinkWork, reindex_file, reindex_written
from server.index.note_versions import HOW_INDEX
from server.index.records import FileRecord
from server.store.db import shared_commit, write_tx
from server.store.health import UNUSABLE
from server.vault.registry import Vault
from server.writes.context import WriteContext
from server.writes.outcome import WriteResult


@dataclass
class Wrote:
    """One note file a write point changed or created, for the index."""

    vault: Vault
    path: str  # vault-relative, as the index knows it
    record: FileRecord | None = None  # the record of the bytes written (None: the file is read)
    result: WriteResult | None = None  # the answer its note id goes into (and an index warning)
    sets_id: bool = True  # its note id is the answer's (not for a symlink's target, a note of its own)
    keep_id: bool = False  # the answer keeps the note id it has when the index gives none
    then: list[Callable[[], None]] = field(default_factory=list)  # after every row: durability, journal token


@dataclass
class Unit:
    """The files of one unit (``multifile.apply_plans``) just changed, for the index: ``files`` are (path
    before, path after or None); see ``unit`` for ``keep_ids`` and ``written``. The unit's own frame comes
    with it: ``ready`` waits for its fsyncs (raising what they raised), ``recorded`` puts its journal's token
    in the call's commit once its rows are written, ``failed`` puts its files back after a failed fsync and
    raises the typed error."""

    vault: Vault
    files: list[tuple[str, str | None]]
    keep_ids: dict[str, str] | None
    written: dict[str, FileRecord]
    ready: Callable[[], object]
    recorded: Callable[[], None]
    failed: Callable[[BaseException], NoReturn]
    warning: str | None = None  # once indexed: the index could not follow (the files are written all the same)


def unit_landed(ctx: WriteContext, item: Unit) -> None:
    """A unit's word for the files it changed: indexed once the call's operation returns (``flush``), or now
    outside a call that indexes after its operation. (How to take the files back should the database fail
    the unit registered itself, ``WriteContext.on_unrecorded``.)"""
    if ctx.index_after is None:
        _index(ctx.conn, [item])
    else:
        ctx.index_after.append(item)


def warn_into(ctx: WriteContext, item: Unit | None, result: WriteResult) -> None:
    """The unit's index warning, if it has one once indexed, into the operation's answer (None: a preview)."""

    def put() -> None:
        if item is not None and item.warning:
            result["indexWarning"] = item.warning

    ctx.when_indexed(put)


def note(ctx: WriteContext, wrote: Wrote, undo: Callable[[], None]) -> None:
    """The one call a write point makes once a note file changed: how to take it back should the database
    then fail, and the file for the index, indexed once the call's operation returns (``flush``) or, outside
    a call that indexes after its operation (``WriteContext.index_after`` None), now."""
    if not ctx.wrote(wrote, undo):
        _index(ctx.conn, [wrote])


def flush(ctx: WriteContext) -> None:
    """Index what the call's operation wrote (each file once, every row before every ``then``), then run the
    callbacks that wanted the new notes' ids (``WriteContext.when_indexed``). The guard and the person's
    writes call it when the operation returns (or failed after writing: what it wrote is indexed all the
    same), in the call's commit, before its provenance row; never after a database failure (the call's files
    are put back)."""
    if not ctx.index_after and not ctx.indexed_hooks:
        return
    kept, hooks = ctx.index_after or [], ctx.indexed_hooks
    ctx.index_after, ctx.indexed_hooks = [], []  # (taken first: a second flush after a failed one does nothing)
    _index(ctx.conn, kept)
    for fn in hooks:
        fn()


def _index(conn: apsw.Connection, items: list[Wrote | Unit]) -> None:
    """Every row first (each its own savepoint, all in the call's one commit when it has a group), then every
    ``then`` in order: the folders' fsyncs run while the rows are written. A unit waits for its own fsyncs
    amid its rows (``unit``)."""
    for item in items:
        if isinstance(item, Unit):
            _index_unit(conn, item)
            continue
        note_id = _reindex(conn, item)
        if item.result is not None and item.sets_id and (note_id is not None or not item.keep_id):
            item.result["noteId"] = note_id
    for item in items:
        if isinstance(item, Wrote):
            for step in item.then:
                step()


def _index_unit(conn: apsw.Connection, item: Unit) -> None:
    try:
        item.warning = unit(conn, item.vault, item.files, item.keep_ids, item.written, ready=item.ready)
    except UNUSABLE:  # the database failed: the unit's files are put back (``WriteContext.take_back``)
        raise
    except BaseException as e:  # its fsyncs failed (its rows are rolled back with them): its files go back
        item.failed(e)
    item.recorded()


def _reindex(conn: apsw.Connection, item: Wrote) -> str | None:
    """The index row of one file just written. The write already happened, so an index failure is a warning
    on the answer (the watcher or the next ``kms index`` heals it) rather than an error an agent would retry
    (and so write twice)."""
    try:
        return reindex_file(conn, item.vault, item.path, item.record)
    except UNUSABLE:  # the database itself failed (its disk full): the note is put back (``undone_unless_recorded``)
        raise
    except Exception as e:  # noqa: BLE001 - see docstring
        if item.result is not None:
            item.result["indexWarning"] = f"written, but the index update failed: {e}"
        return None


def as_it_is(conn: apsw.Connection, vault: Vault, path: str) -> None:
    """Index one note as its file is now, seen by kms rather than written by it (a session's undo catching up
    with a save the watcher had not seen yet)."""
    reindex_file(conn, vault, path, how=HOW_INDEX)


def unit(
    conn: apsw.Connection,
    vault: Vault,
    files: list[tuple[str, str | None]],
    keep_ids: dict[str, str] | None = None,
    written: dict[str, FileRecord] | None = None,
    ready: Callable[[], object] = lambda: None,
) -> str | None:
    """Bring the index in step with a unit's files just changed: ``files`` are (path before, path after or None).

    A file that moved keeps its notes row, so its id; one moved into a hidden folder (``.trash/``) leaves
    the index; one that comes back into it (from the trash) gets back the id in ``keep_ids`` (path ->
    id) when no other note took it. ``written``: the records of the bytes kms writes in place (path ->
    ``record_of_bytes``): those rows are written first, from the records, while ``ready`` (the fsyncs,
    on another thread) is still under way; every file the index reads comes after ``ready`` returned.
    An error of ``ready`` is raised as it is. Links are resolved once for the whole unit (``LinkWork``).
    Returns a warning when the index could not be updated (the files are written; the watcher heals it)."""
    batch = LinkWork()  # links resolved once for every file, not once per file (500 linking notes)
    files = [(old, None if new and any(s.startswith(".") for s in new.split("/")) else new) for old, new in files]
    early = {old: (written or {})[old] for old, new in files if not new and old in (written or {})}
    try:
        with shared_commit(conn), write_tx(conn):  # one transaction: the moved rows and their re-parse
            for old, new in files:
                if new:  # re-parsed at its new path (content_hash '' forces the parse)
                    conn.execute(
                        "UPDATE notes SET path = ?, content_hash = '' WHERE vault_id = ? AND path = ?",
                        (new, vault.id, old),
                    )

            def keep_id(path: str, note_id: str | None) -> None:
                want = (keep_ids or {}).get(path)
                if (
                    note_id
                    and want
                    and note_id != want
                    and not conn.execute("SELECT 1 FROM notes WHERE id = ?", (want,)).fetchall()
                ):
                    conn.execute("UPDATE notes SET id = ? WHERE vault_id = ? AND path = ?", (want, vault.id, path))

            for path, note_id in reindex_written(conn, vault, early, batch).items():  # no file is read for
                keep_id(path, note_id)  # these: they go while the fsyncs run
            try:
                ready()
            except BaseException as e:
                raise _NotReady from e
            for old, new in files:
                path = new or old
                if path in early:
                    continue
                keep_id(path, reindex_file(conn, vault, path, batch=batch, how="kms"))
                if new and new.casefold() != old.casefold():  # (a case-only rename: the old name may be the file)
                    reindex_file(
                        conn, vault, old, batch=batch, how="kms"
                    )  # a row left at the old path (none, normally) goes
            batch.finish(conn, vault.id)
    except _NotReady as e:
        raise e.__cause__ from None  # type: ignore[misc]
    except UNUSABLE:  # the database itself failed (its disk full): the unit is put back, not half recorded
        raise
    except Exception as e:  # noqa: BLE001 - see the docstring
        ready()  # (the files are written all the same)
        return f"written, but the index update failed: {e}"
    return None


class _NotReady(Exception):
    """``unit``: what ``ready`` raised, carried past the index's own error handling."""
