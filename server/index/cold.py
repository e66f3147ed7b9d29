"""A new vault's first index in two transactions: searchable first, complete after (issue 42).

The first transaction commits every note's row and its search (FTS) row, judged by the privacy rules as
they are written (a rule's hidden note is never searchable, not even for a moment): from its commit the
vault answers keyword searches. The second writes what the notes hold besides their text (tags, name
keys, links -- resolved as they are inserted, ``server.index.new_links`` --, headings, properties), the kept
counts, the attachments, and each note's first version in its history. In between ``vaults.index_state``
is ``'searchable'``: ``kms status``, the dashboard and the agents' answers say the vault is not complete.

A crash between the two leaves the notes and that state: the next index of the vault (a server's start,
``kms index``) completes it the way a full reindex does (``server.index.indexer``), into the index an
uninterrupted run leaves (tests/unit/test_index_identity.py, tests/unit/test_cold_phases.py).

A note saved in between (the watcher's reindex, a kms write through the guard: each reindexes its one note
in its own transaction, with its tags, keys and links) belongs to that writer: the second transaction
finds its row written again (its ``indexed_at`` is not the first transaction's, or its path or hash
changed) and leaves it as that writer left it, then resolves every link of the vault again by the SQL
rule (the writer's links were resolved before the vault's keys existed). Its first version in the history
is the one its writer recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

import apsw

from server.index import note_versions
from server.index.link_resolve import resolve_links, resolve_named, sync_attachments
from server.index.new_links import NewLinks
from server.index.privacy import Rules, stamps_back, sync_symlinks
from server.index.records import FileRecord, Keep, Progress, read_all
from server.index.report import IndexReport
from server.index.writer import (
    NewNotes,
    insert_children,
    insert_resolved_links,
    new_children,
)
from server.store import kept_counts
from server.store import version_blobs as blobs
from server.store.db import write_tx
from server.vault.registry import Vault

SEARCHABLE = "searchable"  # vaults.index_state between the two transactions (m056)
# A new vault of at most this many bytes has them held from its first transaction to its second (its first
# versions are compressed there, off the searchable path: 15 % less CPU until searchable on the bench's 10k
# notes, for 35 MB more peak memory); a larger one has them compressed by the worker processes as they read.
RAW_BYTES = 128 * 1024 * 1024
NOT_YET = "links and tags still being built"  # what an agent's answer says of a vault in that state

OnSearchable = Callable[[IndexReport], None]


_stated: set[str] = set()  # databases known to have vaults.index_state (a column never goes away)


def in_two_phases(conn: apsw.Connection) -> bool:
    """Whether this database keeps a vault's index state (m056): one opened at an older schema (a
    migration's test) indexes a new vault in one transaction, as before."""
    if conn.filename and conn.filename in _stated:
        return True
    if not any(r[1] == "index_state" for r in conn.execute("PRAGMA table_info(vaults)")):
        return False
    if conn.filename:  # (every in-memory database has the name '')
        _stated.add(conn.filename)
    return True


def incomplete(conn: apsw.Connection) -> dict[int, str]:
    """The vaults searchable but not complete: id -> name (none in a database older than m056)."""
    if not in_two_phases(conn):
        return {}
    return {
        int(vid): str(name)
        for vid, name in conn.execute("SELECT id, name FROM vaults WHERE index_state = ?", (SEARCHABLE,))
    }


@dataclass
class HistoryPlan:
    """What the worker processes do with a note's bytes for its history (``keep``), and the vault's seed
    dictionary: one to make from these files (a new vault), or the one it has."""

    keep: Keep  # see server.index.records.Keep
    new_seed: bytes | None
    seed_bid: int | None


def history_plan(conn: apsw.Connection, vault: Vault, todo: list[tuple[str, int, int]], *, new: bool) -> HistoryPlan:
    """The plan for reading ``todo``; ``new``: the vault has no note yet (a seed is made for it)."""
    if not note_versions.active(conn):
        return HistoryPlan(False, None, None)
    seed_bid = blobs.seed_of(conn, vault.id)
    new_seed = (
        note_versions.seed_samples(vault.root, [p for p, _m, _s in todo])
        if new and seed_bid is None and len(todo) >= blobs.SEED_MIN_NOTES
        else None
    )
    # a worker compresses against the vault's seed (see server.store.version_blobs)
    keep = new_seed if new_seed is not None else blobs.blob_bytes(conn, seed_bid) if seed_bid else None
    return HistoryPlan(keep, new_seed, seed_bid)


def index_cold(
    conn: apsw.Connection,
    vault: Vault,
    todo: list[tuple[str, int, int]],
    report: IndexReport,
    *,
    attachments: list[str],
    symlinks: Collection[str],
    rules: Rules,
    progress: Progress | None,
    how: str,
    on_searchable: OnSearchable | None,
    started: float,
) -> bool:
    """Index the files ``todo`` of ``vault``, which has no note yet, in the two transactions; False (and
    nothing written) when the vault has notes by the time the first one holds the write lock (another
    process indexed it first): the caller indexes it the ordinary way."""
    plan = history_plan(conn, vault, todo, new=True)
    # the bytes come back as they are and their first versions are compressed in the second transaction,
    # unless they are too many to hold until then: the worker processes compress them, as for any index
    raw = plan.keep is not False and sum(size for _p, _m, size in todo) <= RAW_BYTES
    first = _searchable(conn, vault, todo, report, symlinks, rules, progress, True if raw else plan.keep)
    if first is None:
        return False
    done, now = first
    report.searchable_seconds = time.perf_counter() - started
    if on_searchable is not None:
        on_searchable(report)
    _complete(conn, vault, done, now, attachments, plan, how)
    return True


def _searchable(
    conn: apsw.Connection,
    vault: Vault,
    todo: list[tuple[str, int, int]],
    report: IndexReport,
    symlinks: Collection[str],
    rules: Rules,
    progress: Progress | None,
    keep: Keep,
) -> tuple[list[tuple[int, FileRecord]], float] | None:
    """The first transaction: the notes rows and their FTS rows, judged by the privacy rules."""
    now = time.time()
    done: list[tuple[int, FileRecord]] = []
    with write_tx(conn), kept_counts.deferred(conn):
        if conn.execute("SELECT 1 FROM notes WHERE vault_id = ? LIMIT 1", (vault.id,)).fetchall():
            return None
        new_notes = NewNotes(conn, vault.id, children=False)
        for rec in read_all(vault.root, todo, progress, vault.rules, keep, symlinks):
            if rec.error or rec.values is None:
                report.errors.append(rec.error or f"{rec.path}: unreadable")
                continue
            values = rec.values  # the record's own: filled in place
            values["indexed_at"] = now
            values["hidden_rule"] = rules.reason(
                values["path"], values["frontmatter"], values["tags"], values["link_to"], rec.fm_raw
            )
            report.added += 1
            if rec.flagged:
                report.flagged += 1
            done += _inserted(new_notes.add(rec, values))
        done += _inserted(new_notes.flush())
        stamps_back(conn, vault.id)  # written with triggers off: the stamps of notes gone from it, given back
        sync_symlinks(conn, vault.id)
        conn.execute(
            "UPDATE vaults SET privacy_rules = ?, index_state = ? WHERE id = ?",
            (rules.fingerprint, SEARCHABLE, vault.id),
        )
    return done, now


def _inserted(done: list[tuple[int, FileRecord]]) -> list[tuple[int, FileRecord]]:
    """Records whose notes rows are written: their values (the body, the frontmatter...) are let go, the
    second transaction needs only their children rows, path and hash (a 10k vault's bodies, held until
    then, cost page faults for nothing)."""
    for _rid, rec in done:
        rec.values = None
    return done


def _first_versions(ours: list[tuple[int, FileRecord]], keep: Keep) -> list[bytes | None]:
    """Each note's first version compressed as ``keep`` says (``HistoryPlan``): the bytes held since the first
    transaction compressed all in one call, and let go (off the first transaction's path, where the worker
    processes used to compress them: a tenth of their CPU on the bench vault, before it was searchable);
    or what a worker compressed (a vault past ``RAW_BYTES``)."""
    held = [rec.data for _rid, rec in ours if rec.data is not None]
    frames = iter(blobs.compress_many(held, keep if isinstance(keep, bytes) else None))
    out = [next(frames) if rec.data is not None else rec.packed for _rid, rec in ours]
    for _rid, rec in ours:
        rec.data = rec.packed = None
    return out


def _complete(
    conn: apsw.Connection,
    vault: Vault,
    done: list[tuple[int, FileRecord]],
    now: float,
    attachments: list[str],
    plan: HistoryPlan,
    how: str,
) -> None:
    """The second transaction: children, links, counts, attachments, history; then the vault is complete."""
    with write_tx(conn), kept_counts.deferred(conn):
        state = conn.execute("SELECT index_state FROM vaults WHERE id = ?", (vault.id,)).fetchall()
        if not state or state[0][0] != SEARCHABLE:
            return  # completed meanwhile by another process's index (or the vault was removed)
        as_written = {
            int(rid): (path, chash)
            for rid, path, chash in conn.execute(
                "SELECT rid, path, content_hash FROM notes WHERE vault_id = ? AND indexed_at = ?", (vault.id, now)
            )
        }
        ours = [(rid, rec) for rid, rec in done if as_written.get(rid) == (rec.path, rec.content_hash)]
        rewritten = len(ours) != len(done)  # notes saved (or removed) since the first transaction: their writer's
        sync_attachments(conn, vault.id, attachments)
        tags, keys, links, heads, props = new_children(ours, vault.id)
        insert_children(conn, tags, keys, [] if not rewritten else links, heads, props)
        if rewritten:
            resolve_links(conn, None, None)
        else:
            resolver = NewLinks(conn, vault.id, ours)
            insert_resolved_links(conn, [row for rid, rec in ours for row in resolver.rows(rid, rec)])
            resolve_named(conn)  # links naming a vault: this one's, and other vaults' that name this one
        if plan.keep is not False:
            seed_bid = blobs.put_seed(conn, vault.id, plan.new_seed) if plan.new_seed is not None else plan.seed_bid
            packed = _first_versions(ours, plan.keep)
            seen = [
                note_versions.Seen(rid, rec.path, rec.content_hash, rec.size, None, p)
                for (rid, rec), p in zip(ours, packed, strict=True)
            ]
            note_versions.record_seen(
                conn, vault.id, seen, how, now, packed_base=seed_bid if plan.keep is not None else None
            )
            if rewritten:  # the guarantee: every note has a first version once the vault is complete
                note_versions.backfill(conn, vault.id, vault.root)
        kept_counts.rebuild(conn)
        conn.execute("UPDATE vaults SET index_state = NULL, last_indexed_at = ? WHERE id = ?", (time.time(), vault.id))
