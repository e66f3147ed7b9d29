"""The index side of a unit of several files (``multifile.apply_plans``): the rows follow the files in one
transaction, a moved note keeping its row (so its id), links resolved once for the whole unit.

Links are collected into one ``indexer.LinkWork`` and resolved at its end, the privacy rules are looked
up once, and the rows of the notes written in place go in batches through ``indexer.reindex_written``
(every FTS delete before any insert, no savepoint per file)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import apsw

from server.store.health import UNUSABLE
from server.vault.registry import Vault

if TYPE_CHECKING:
    from server.index.records import FileRecord


def reindex_moves(
    conn: apsw.Connection,
    vault: Vault,
    files: list[tuple[str, str | None]],
    keep_ids: dict[str, str] | None = None,
    written: dict[str, FileRecord] | None = None,
    ready: Callable[[], object] = lambda: None,
) -> str | None:
    """Bring the index in step with files just changed: ``files`` are (path before, path after or None).

    A file that moved keeps its notes row, so its id; one moved into a hidden folder (``.trash/``) leaves
    the index; one that comes back into it (from the trash) gets back the id in ``keep_ids`` (path ->
    id) when no other note took it. ``written``: the records of the bytes kms writes in place (path ->
    ``record_of_bytes``): those rows are written first, from the records, while ``ready`` (the fsyncs,
    on another thread) is still under way; every file the index reads comes after ``ready`` returned.
    An error of ``ready`` is raised as it is. Returns a warning when the index could not be updated
    (the files are written; the watcher heals it)."""
    # not at import: the dashboard imports this
    from server.index.indexer import LinkWork, reindex_file, reindex_written
    from server.store.db import shared_commit, write_tx

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
                keep_id(path, reindex_file(conn, vault, path, batch=batch))
                if new and new.casefold() != old.casefold():  # (a case-only rename: the old name may be the file)
                    reindex_file(conn, vault, old, batch=batch)  # a row left at the old path (none, normally) goes
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
    """``reindex_moves``: what ``ready`` raised, carried past the index's own error handling."""
