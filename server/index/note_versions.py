"""What the index keeps of every version it sees (docs/history.md): the capture side of note history.

Every notes row the index writes with new bytes (the watcher, ``kms index``, kms's own writes and
reverts, all through ``server.index.indexer``) records that version here, **in the same transaction**:
whatever the index holds, the history holds too, so a crash between a file's change and its record
loses nothing kms had seen (the version the file replaced was recorded when kms saw it). A note's line
of versions (``history_notes``) follows its row (a rename keeps the row, so its history); a row that goes
leaves a deletion marker and keeps its line, which a new note at the same path, or with the same bytes
soon after, joins again (a move the watcher saw as a delete and a create).

Who made a version is not decided here (the index sees bytes, not callers): ``server.activity.note_history``
tells it from the provenance rows. The bytes are ``server.store.version_blobs``'s.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from server.config.settings import default_config_path, load_settings
from server.store import version_blobs as blobs
from server.store.db import scalar

REJOIN_S = 3600.0  # a new note with a deleted note's last bytes within this long continues its history
HOW_INDEX, HOW_WATCH, HOW_KMS = "index", "watch", "kms"
HOW_DELETED, HOW_MOVED = "deleted", "moved"

_enabled: tuple[tuple, bool] | None = None
_INSERT_VERSION = "INSERT INTO history_versions(hid, at, path, bid, size, how, hidden) VALUES (?, ?, ?, ?, ?, ?, ?)"


def enabled() -> bool:
    """``history.enabled``, re-read only when the settings file changed (one stat)."""
    global _enabled

    cfg = default_config_path()
    try:
        st = os.stat(cfg)
        stamp: tuple = (str(cfg), st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = (str(cfg), None)
    if _enabled is not None and _enabled[0] == stamp:
        return _enabled[1]
    value = bool(load_settings(cfg, env={}, has_vault=True).get("history.enabled"))
    _enabled = (stamp, value)
    return value


_migrated: set[str] = set()  # databases known to have the history tables (tables never go away)


def active(conn: apsw.Connection) -> bool:
    """History is on and this database has its tables (a database opened without its migrations,
    at an older schema, keeps none)."""
    if not enabled():
        return False
    if conn.filename in _migrated:
        return True
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'history_notes'").fetchone() is None:
        return False
    if conn.filename:  # (every in-memory database has the name '')
        _migrated.add(conn.filename)
    return True


@dataclass
class Seen:
    """A version the index just wrote a row for: its note's rid, path, hash, size and bytes (``data``,
    or ``packed``: compressed against the vault's seed by a worker process)."""

    rid: int
    path: str
    digest: str
    size: int
    data: bytes | None = None
    packed: bytes | None = None


def record_seen(
    conn: apsw.Connection,
    vault_id: int,
    seen: list[Seen],
    how: str,
    at: float | None = None,
    packed_base: int | None = None,
) -> int:
    """Record each version (inside the caller's transaction, after the rows were written); returns how
    many new versions were kept. ``packed_base``: the blob a worker compressed ``Seen.packed`` against."""
    if not seen or not active(conn):
        return 0
    at = time.time() if at is None else at
    if (
        len(seen) >= 64
        and not conn.execute("SELECT 1 FROM history_notes WHERE vault_id = ? LIMIT 1", (vault_id,)).fetchone()
    ):
        return _first_lines(conn, vault_id, seen, how, at, packed_base)
    seed: int | None | bool = False  # looked up once, when a version needs it
    any_gone: bool | None = None
    kept = 0
    for s in seen:
        if s.data is None and s.packed is None:
            continue
        note = conn.execute("SELECT id, hidden_at IS NOT NULL FROM notes WHERE rid = ?", (s.rid,)).fetchone()
        if note is None:
            continue
        note_id, hidden = note
        row = conn.execute(
            "SELECT h.hid, coalesce(b.hash, ''), h.last_bid, h.path, h.note_id FROM history_notes h "
            "LEFT JOIN history_blobs b ON b.bid = h.last_bid WHERE h.rid = ?",
            (s.rid,),
        ).fetchone()
        if row is None:
            if any_gone is None:
                any_gone = bool(
                    conn.execute(
                        "SELECT 1 FROM history_notes WHERE vault_id = ? AND rid IS NULL LIMIT 1", (vault_id,)
                    ).fetchone()
                )
            hid = _rejoin(conn, vault_id, s, at) if any_gone else None
            if hid is None:
                conn.execute(
                    "INSERT INTO history_notes(vault_id, rid, note_id, path) VALUES (?, ?, ?, ?)",
                    (vault_id, s.rid, note_id, s.path),
                )
                hid = conn.last_insert_rowid()
                last_hash, last_bid, last_path, deleted_at = "", None, s.path, None
            else:
                found: Any = conn.execute(
                    "SELECT coalesce(b.hash, ''), h.last_bid, h.path, h.deleted_at FROM history_notes h "
                    "LEFT JOIN history_blobs b ON b.bid = h.last_bid WHERE h.hid = ?",
                    (hid,),
                ).fetchone()
                last_hash, last_bid, last_path, deleted_at = found
                conn.execute(
                    "UPDATE history_notes SET rid = ?, note_id = ?, deleted_at = NULL WHERE hid = ?",
                    (s.rid, note_id, hid),
                )
            conn.execute("INSERT OR REPLACE INTO history_ids VALUES (?, ?)", (note_id, hid))
            gone_before = deleted_at is not None  # (a line kms repair detached was never deleted)
        else:
            hid, last_hash, last_bid, last_path, line_id = row
            gone_before = False
            if line_id != note_id:  # the row took back an id it had (a note restored from the trash)
                conn.execute("UPDATE history_notes SET note_id = ? WHERE hid = ?", (note_id, hid))
                conn.execute("INSERT OR REPLACE INTO history_ids VALUES (?, ?)", (note_id, hid))
        if s.digest == last_hash and not gone_before:
            if s.path != last_path:  # a rename or move: same bytes, one more entry
                conn.execute(_INSERT_VERSION, (hid, at, s.path, last_bid, s.size, HOW_MOVED, int(hidden)))
                conn.execute("UPDATE history_notes SET path = ? WHERE hid = ?", (s.path, hid))
            continue
        if s.data is not None:
            if seed is False:
                seed = blobs.seed_of(conn, vault_id)
            bid = blobs.put_blob(conn, s.data, s.digest, neighbour=last_bid, seed=seed or None)
        else:  # compressed against the seed by a worker (a cold index: no neighbour)
            bid = blobs.blob_id(conn, s.digest) or blobs.put_blob(
                conn, b"", s.digest, seed=packed_base, packed=s.packed, size=s.size
            )
        conn.execute(_INSERT_VERSION, (hid, at, s.path, bid, s.size, how, int(hidden)))
        conn.execute("UPDATE history_notes SET path = ?, last_bid = ? WHERE hid = ?", (s.path, bid, hid))
        kept += 1
    return kept


def _first_lines(
    conn: apsw.Connection, vault_id: int, seen: list[Seen], how: str, at: float, packed_base: int | None
) -> int:
    """``record_seen`` for a vault with no history yet (a cold index): every note starts its line, so
    rows go in by batches, as the notes' own rows do."""
    seed = blobs.seed_of(conn, vault_id)
    kept = 0
    for start in range(0, len(seen), 500):
        chunk = [s for s in seen[start : start + 500] if s.data is not None or s.packed is not None]
        marks = ",".join("?" * len(chunk))
        notes = {
            int(r[0]): (r[1], r[2])
            for r in conn.execute(
                f"SELECT rid, id, hidden_at IS NOT NULL FROM notes WHERE rid IN ({marks})", [s.rid for s in chunk]
            )
        }
        lines, ids, versions = [], [], []
        hid = int(scalar(conn, "SELECT coalesce(max(hid), 0) FROM history_notes"))
        packed = blobs.put_packed(
            conn, [(s.digest, s.packed, s.size) for s in chunk if s.rid in notes and s.packed is not None], packed_base
        )
        for s in chunk:
            if s.rid not in notes:
                continue
            note_id, hidden = notes[s.rid]
            bid = packed[s.digest] if s.packed is not None else blobs.put_blob(conn, s.data or b"", s.digest, seed=seed)
            hid += 1
            lines.append((hid, vault_id, s.rid, note_id, s.path, bid))
            ids.append((note_id, hid))
            versions.append((hid, at, s.path, bid, s.size, how, int(hidden)))
        conn.executemany(
            "INSERT INTO history_notes(hid, vault_id, rid, note_id, path, last_bid) VALUES (?, ?, ?, ?, ?, ?)", lines
        )
        conn.executemany("INSERT OR REPLACE INTO history_ids VALUES (?, ?)", ids)
        conn.executemany(_INSERT_VERSION, versions)
        kept += len(versions)
    return kept


def _rejoin(conn: apsw.Connection, vault_id: int, s: Seen, at: float) -> int | None:
    """The deleted note a new one continues: the last one deleted at this path, else one deleted within
    ``REJOIN_S`` whose last bytes these are (a move seen as a delete and a create)."""
    row = (
        conn.execute(
            "SELECT hid FROM history_notes WHERE vault_id = ? AND path = ? AND rid IS NULL "
            "ORDER BY deleted_at DESC LIMIT 1",
            (vault_id, s.path),
        ).fetchone()
        or conn.execute(
            "SELECT h.hid FROM history_blobs b JOIN history_notes h ON h.last_bid = b.bid "
            "WHERE h.vault_id = ? AND b.hash = ? AND h.rid IS NULL AND h.deleted_at >= ? "
            "ORDER BY deleted_at DESC LIMIT 1",
            (vault_id, s.digest, at - REJOIN_S),
        ).fetchone()
    )
    return None if row is None else int(row[0])


def record_gone(conn: apsw.Connection, rid: int, how: str = HOW_DELETED, at: float | None = None) -> None:
    """The note of row ``rid`` is gone (before its row is deleted): a deletion marker; its line is kept."""
    if not active(conn):
        return
    row = conn.execute("SELECT hid, path FROM history_notes WHERE rid = ?", (rid,)).fetchone()
    if row is None:
        return
    at = time.time() if at is None else at
    hid, path = row
    conn.execute(
        "INSERT INTO history_versions(hid, at, path, bid, size, how) VALUES (?, ?, ?, NULL, 0, ?)",
        (hid, at, path, how),
    )
    conn.execute("UPDATE history_notes SET rid = NULL, deleted_at = ? WHERE hid = ?", (at, hid))


def seed_samples(root: Path, paths: list[str]) -> bytes:
    """A seed dictionary for a cold index: the start of ``SEED_NOTES`` of these notes, spread out."""
    step = max(1, len(paths) // blobs.SEED_NOTES)
    samples = []
    for rel in paths[::step][: blobs.SEED_NOTES]:
        try:
            with open(root / rel, "rb") as fh:
                samples.append(fh.read(blobs.SEED_BYTES_PER_NOTE))
        except OSError:
            continue
    return blobs.make_seed(samples)


def missing(conn: apsw.Connection, vault_id: int) -> list[tuple[int, str, str]]:
    """(rid, path, hash) of the vault's notes with no history yet (indexed before history was kept, or
    while it was off)."""
    return [
        (int(r[0]), str(r[1]), str(r[2]))
        for r in conn.execute(
            "SELECT n.rid, n.path, n.content_hash FROM notes n WHERE n.vault_id = ? "
            "AND NOT EXISTS (SELECT 1 FROM history_notes h WHERE h.rid = n.rid)",
            (vault_id,),
        )
    ]


def backfill(conn: apsw.Connection, vault_id: int, root: Path) -> int:
    """Keep the current version of every note that has none yet, if its file still holds the indexed
    bytes (inside the caller's transaction). Returns how many were kept."""
    if not active(conn):
        return 0
    todo = missing(conn, vault_id)
    if len(todo) >= blobs.SEED_MIN_NOTES and blobs.seed_of(conn, vault_id) is None:  # an upgraded vault's first index
        blobs.put_seed(conn, vault_id, seed_samples(root, [path for _rid, path, _h in todo]))
    seen = []
    for rid, path, digest in todo:
        try:
            data = (root / path).read_bytes()
        except OSError:
            continue
        if blobs.sha256_hex(data) == digest:
            seen.append(Seen(rid, path, digest, len(data), data))
    return record_seen(conn, vault_id, seen, HOW_INDEX)


DAY_S = 86400.0


@dataclass
class PruneReport:
    versions: int = 0  # versions dropped
    notes: int = 0  # lines left with no version, forgotten
    freed: int = 0  # compressed bytes freed
    stored: int = 0  # compressed bytes kept


def _protected(rows: list[tuple]) -> set[int]:
    """The entries retention never drops: each note's newest entry and newest version with bytes, and the
    last version before each deletion (what a deleted note is restored to)."""
    keep: set[int] = set()
    last: dict[int, int] = {}
    newest: dict[int, int] = {}
    for vid, hid, _at, bid, how in rows:
        if how == HOW_DELETED and hid in last:
            keep.add(last[hid])
        if bid is not None:
            last[hid] = vid
        newest[hid] = vid
    keep.update(last.values())
    keep.update(newest.values())
    return keep


def _entries(conn: apsw.Connection) -> list[Any]:
    return conn.execute("SELECT vid, hid, at, bid, how FROM history_versions ORDER BY vid").fetchall()


def prune(
    conn: apsw.Connection, *, keep_all_days: int, keep_daily_days: int, max_bytes: int, now: float | None = None
) -> PruneReport:
    """Apply the retention (``history.keep_all_days``, ``history.keep_daily_days``, ``history.max_mb``):
    every version of the last ``keep_all_days``, then the last of each day up to ``keep_daily_days``, older
    ones dropped, then the oldest past the size cap; never a note's newest, nor what a deleted note is."""
    now = time.time() if now is None else now
    report = PruneReport()
    rows = _entries(conn)
    keep = _protected(rows)
    day_last: dict[tuple[int, int], int] = {}
    for vid, hid, at, _bid, _how in rows:
        day_last[(hid, int(at // DAY_S))] = vid
    doomed: list[int] = []
    for vid, hid, at, _bid, _how in rows:
        age = now - at
        if vid in keep or age <= keep_all_days * DAY_S:
            continue
        if age <= keep_daily_days * DAY_S and day_last[(hid, int(at // DAY_S))] == vid:
            continue
        doomed.append(vid)
    _drop_versions(conn, doomed, report)
    if max_bytes > 0:
        while blobs.stored_bytes(conn) > max_bytes:
            rows = _entries(conn)
            keep = _protected(rows)
            oldest: list[int] = [int(r[0]) for r in rows if r[0] not in keep][:256]
            if not oldest:
                break
            _drop_versions(conn, oldest, report)
    report.stored = blobs.stored_bytes(conn)
    return report


def _drop_versions(conn: apsw.Connection, vids: list[int], report: PruneReport) -> None:
    for at in range(0, len(vids), 500):
        chunk = vids[at : at + 500]
        conn.execute(f"DELETE FROM history_versions WHERE vid IN ({','.join('?' * len(chunk))})", chunk)
    report.versions += len(vids)
    empty = [
        r[0]
        for r in conn.execute(
            "SELECT hid FROM history_notes h WHERE NOT EXISTS (SELECT 1 FROM history_versions v WHERE v.hid = h.hid)"
        )
    ]
    for hid in empty:
        conn.execute("DELETE FROM history_ids WHERE hid = ?", (hid,))
        conn.execute("DELETE FROM history_notes WHERE hid = ?", (hid,))
    report.notes += len(empty)
    report.freed += blobs.drop_blobs(conn, blobs.unused_blobs(conn))
    conn.execute(
        "UPDATE history_notes SET last_bid = NULL WHERE last_bid IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM history_blobs b WHERE b.bid = history_notes.last_bid)"
    )


def forget(conn: apsw.Connection, hid: int) -> int:
    """Purge a note's line: every version, its ids, the bytes no other note holds, and its snippets in a
    seed dictionary. Returns how many versions went. (The note, if it still exists, starts a new line at
    its next change.)"""
    texts = [
        blobs.blob_bytes(conn, int(r[0]))
        for r in conn.execute("SELECT DISTINCT bid FROM history_versions WHERE hid = ? AND bid IS NOT NULL", (hid,))
    ]
    count = int(scalar(conn, "SELECT count(*) FROM history_versions WHERE hid = ?", (hid,)))
    conn.execute("DELETE FROM history_versions WHERE hid = ?", (hid,))
    conn.execute("DELETE FROM history_ids WHERE hid = ?", (hid,))
    conn.execute("DELETE FROM history_notes WHERE hid = ?", (hid,))
    blobs.drop_blobs(conn, blobs.unused_blobs(conn))
    blobs.scrub_seeds(conn, texts)
    blobs.forget_cached()
    return count


def stats(conn: apsw.Connection) -> dict[str, Any]:
    """What ``kms doctor`` tells of the history: how much is kept, and versions whose bytes are missing
    (a damaged database repaired: ``kms repair`` carries over what it can read)."""
    return {
        "versions": int(scalar(conn, "SELECT count(*) FROM history_versions WHERE bid IS NOT NULL")),
        "notes": int(scalar(conn, "SELECT count(*) FROM history_notes")),
        "deletedNotes": int(scalar(conn, "SELECT count(*) FROM history_notes WHERE rid IS NULL")),
        "storedBytes": blobs.stored_bytes(conn),
        "oldest": scalar(conn, "SELECT min(at) FROM history_versions"),
        "missingBytes": int(
            scalar(
                conn,
                "SELECT count(*) FROM history_versions v WHERE v.bid IS NOT NULL "
                "AND NOT EXISTS (SELECT 1 FROM history_blobs b WHERE b.bid = v.bid)",
            )
        ),
    }
