"""Index one file the moment it changes: a watcher event, or the bytes kms itself just wrote.

Its own room because it is the other way in: ``server.index.indexer`` brings a whole vault in step
with its files (scan, manifest, renames, the cold two-phase index), while this path takes a single
path (or a batch kms wrote, links resolved once by ``LinkWork``) under the write lock, skipping the
lock entirely when the watcher only echoes kms's own write. The write seam (``server.writes.reindex``)
and the watcher call it; the full index shares only ``TOUCHED`` with it.
"""

from __future__ import annotations

import contextlib
import stat
import time
from dataclasses import dataclass, field

import apsw

from server.index import conflicts, note_versions
from server.index.link_resolve import affected_keys, resolve_links
from server.index.privacy import Rules, purge_embeddings, sync_symlinks, vault_rules
from server.index.records import FileRecord, read_record
from server.index.writer import (
    ChangedNotes,
    StoredRows,
    delete_note_row,
    insert_note,
    update_note,
    write_children,
)
from server.store.db import write_tx
from server.vault.registry import Vault

# A touched file with the same bytes: its date follows the mtime unless its frontmatter dates it
TOUCHED = (
    "UPDATE notes SET updated_at = CASE WHEN updated_at = mtime_ns / 1e9 THEN ? ELSE updated_at END, "
    "mtime_ns = ? WHERE rid = ?"
)


@dataclass
class LinkWork:
    """Link resolution put off by ``reindex_file`` for a batch of files (a rename's 500 linking notes):
    resolved once by ``finish`` instead of once per file."""

    keys: set[str] = field(default_factory=set)
    srcs: set[int] = field(default_factory=set)
    symlinks: bool = False
    rules: Rules | None = None  # the privacy rules, looked up once for the batch (two stats a file otherwise)

    def finish(self, conn: apsw.Connection, vault_id: int) -> None:
        """Resolve what the batch changed (inside the batch's transaction)."""
        resolve_links(conn, self.keys, self.srcs)
        if self.symlinks:
            sync_symlinks(conn, vault_id)


def reindex_file(
    conn: apsw.Connection,
    vault: Vault,
    relpath: str,
    written: FileRecord | None = None,
    batch: LinkWork | None = None,
    how: str | None = None,
) -> str | None:
    """Index one file now (after a write, or a watcher event); return its note id, None if gone.

    ``written``: the record of the bytes kms itself just renamed into place (``record_of_bytes``,
    built while they were being fsynced), so the file is not read and parsed a second time.
    ``batch``: links are not resolved here but collected into it (the caller holds one transaction
    over the whole batch and calls ``batch.finish``). ``how``: who saw the change, for its history
    (kms's own write when ``written`` is given, else the watcher).
    """
    how = how or (note_versions.HOW_KMS if written is not None else note_versions.HOW_WATCH)
    if written is None and conflicts.copy_changed(conn, vault, relpath):
        return None  # a sync tool's conflict copy: recorded as a conflict, never a note
    work = batch or LinkWork()
    st = None
    if written is None:
        full = vault.root / relpath
        try:
            st = full.stat()
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            return None  # a FIFO or device named *.md: opening it could block forever
        if st is not None:
            # the watcher echoing kms's own write: indexed already, so not even the write lock is taken
            # (taking it would make the next tool call wait for it)
            indexed = conn.execute(
                "SELECT id, mtime_ns, size_bytes, content_hash FROM notes WHERE vault_id = ? AND path = ?",
                (vault.id, relpath),
            ).fetchall()
            if indexed and indexed[0][1:3] == (st.st_mtime_ns, st.st_size):
                note_id, known_hash = str(indexed[0][0]), str(indexed[0][3])
                same = read_record(
                    str(vault.root), relpath, st.st_mtime_ns, st.st_size, known_hash=known_hash, dialect=vault.rules
                )
                if same.unchanged:  # (a same-size edit within one mtime tick is parsed again under the lock)
                    return note_id
    # in a batch the caller's transaction is the unit: a savepoint per file would cost time for nothing
    # (an error unwinds the whole batch anyway)
    with write_tx(conn) if batch is None or not conn.in_transaction else contextlib.nullcontext(conn):
        # looked up under the write lock: another process (a second server's watcher) may have
        # indexed this path a moment ago, and inserting it twice would violate UNIQUE(vault_id, path)
        row = next(
            iter(
                conn.execute(
                    "SELECT rid, content_hash, mtime_ns, id, hidden_at FROM notes WHERE vault_id = ? AND path = ?",
                    (vault.id, relpath),
                )
            ),
            None,
        )
        if written is None:  # the file as it is now: the stat above came before the lock, and a kms move
            try:  # that held the lock meanwhile may have put a file here, or taken it away (its row deleted
                st = full.stat()  # on a stale "gone" lost the note's id)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISREG(st.st_mode):
                return None
        if written is None and st is None:
            if row:
                work.keys.update(affected_keys(conn, row[0]))
                note_versions.record_gone(conn, row[0])
                delete_note_row(conn, row[0])
                if batch is None:
                    work.finish(conn, vault.id)
            return None
        # a touched file with the same bytes costs a hash, not a parse: only its mtime is followed
        known = row[1] if row else None
        if written is None:
            assert st is not None
            rec = read_record(
                str(vault.root), relpath, st.st_mtime_ns, st.st_size, known_hash=known, dialect=vault.rules
            )
        elif written.content_hash == known:
            rec = FileRecord(relpath, written.mtime_ns, written.size, written.content_hash, unchanged=True)
        else:
            rec = written
        if rec.unchanged and row:
            if row[2] != rec.mtime_ns:
                conn.execute(TOUCHED, (rec.mtime_ns / 1e9, rec.mtime_ns, row[0]))
            return row[3]
        if rec.error or rec.values is None:
            return None
        values = {**rec.values, "indexed_at": time.time()}
        rules = work.rules = work.rules or vault_rules(conn, vault.id, vault.root)
        values["hidden_rule"] = rules.reason(
            relpath, values["frontmatter"], values["tags"], values["link_to"], rec.fm_raw
        )
        if row:
            rid = row[0]
            update_note(conn, rid, values)
        else:
            rid = insert_note(conn, vault.id, values, time.time())
        keys, links_changed = write_children(conn, rid, vault.id, rec)
        work.keys.update(keys)
        if links_changed:
            work.srcs.add(rid)
        if values["hidden_rule"]:
            purge_embeddings(conn, [rid])
        note_versions.record_seen(
            conn, vault.id, [note_versions.Seen(rid, relpath, rec.content_hash, rec.size, rec.data)], how
        )
        if values["link_to"] or values["hidden_rule"] or row and row[4] is not None:
            work.symlinks = True  # symlinks to this note follow it
        if batch is None:
            work.finish(conn, vault.id)
        return next(conn.execute("SELECT id FROM notes WHERE rid = ?", (rid,)))[0]


def reindex_written(
    conn: apsw.Connection, vault: Vault, written: dict[str, FileRecord], work: LinkWork
) -> dict[str, str | None]:
    """``reindex_file`` for many files kms itself just rewrote where they are (a rename's 500 linking
    notes), inside the caller's transaction, links left to ``work``: their rows read a chunk at a time
    and written in batches, every FTS delete before any insert (one note at a time made one FTS segment
    per note). Returns path -> note id; a file with no row yet goes through ``reindex_file``."""
    paths = list(written)
    rows: dict[str, tuple] = {}
    for at in range(0, len(paths), 500):
        chunk = paths[at : at + 500]
        rows.update(
            (r[0], tuple(r[1:]))
            for r in conn.execute(
                "SELECT path, rid, content_hash, mtime_ns, id, hidden_at FROM notes "
                f"WHERE vault_id = ? AND path IN ({','.join('?' * len(chunk))})",
                (vault.id, *chunk),
            )
        )
    stored = StoredRows(conn, [rows[p][0] for p in paths if p in rows], notes=False)  # (only changed ones are written)
    changed = ChangedNotes(conn)
    rules = work.rules = work.rules or vault_rules(conn, vault.id, vault.root)
    now, ids, hidden = time.time(), {}, []
    seen: list[note_versions.Seen] = []
    for path, rec in written.items():
        if path not in rows or rec.values is None:
            ids[path] = reindex_file(conn, vault, path, rec, batch=work)
            continue
        rid, known_hash, mtime_ns, ids[path], hidden_at = rows[path]
        if rec.content_hash == known_hash:
            if mtime_ns != rec.mtime_ns:
                conn.execute(TOUCHED, (rec.mtime_ns / 1e9, rec.mtime_ns, rid))
            continue
        values = {**rec.values, "indexed_at": now}
        values["hidden_rule"] = rules.reason(path, values["frontmatter"], values["tags"], values["link_to"], rec.fm_raw)
        changed.queue(rid, values)
        seen.append(note_versions.Seen(rid, path, rec.content_hash, rec.size, rec.data))
        keys, links_changed = write_children(conn, rid, vault.id, rec, stored.children_of(rid))
        work.keys.update(keys)
        if links_changed:
            work.srcs.add(rid)
        if values["hidden_rule"]:
            hidden.append(rid)
        if values["link_to"] or values["hidden_rule"] or hidden_at is not None:
            work.symlinks = True  # symlinks to this note follow it
    changed.flush()
    note_versions.record_seen(conn, vault.id, seen, note_versions.HOW_KMS, now)
    purge_embeddings(conn, hidden)
    return ids
