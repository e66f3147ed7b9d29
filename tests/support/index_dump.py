"""Every table of an index as sorted rows that do not depend on the route that wrote them, and their digest.

What differs legitimately between two indexes of the same files, and how each is made comparable:

- row ids: a note's ``rid`` (and ``src_rid``, ``dst_rid``, the FTS rowid, a history line's ``hid``), its
  random public ``id`` (``note_id``), a vault's ``id``, a blob's ``bid`` (``base``, ``last_bid``): replaced
  by what they stand for (``vault:path`` of the note, the vault's name, the blob's content hash). Which
  note gets which rid follows the order the scan met the files (``os.scandir``'s, not sorted);
- times of the run: ``indexed_at``, ``vaults.added_at``/``last_indexed_at``, ``history_versions.at``,
  ``_migrations.applied_at``, ``hidden_at`` (the time a rule hid it; only whether it is set is kept),
  ``vid`` (the order versions were recorded in);
- the FTS5 shadow tables' segments (``notes_fts_data``/``_idx``): how many segments and what is in each
  follows the batches the inserts came in; the index they hold is compared instead, as the
  ``fts5vocab`` ``instance`` rows (term, note, column, offset), and ``notes_fts_docsize`` per note;
- compressed history bytes (``history_blobs.data``) and the vault's seed dictionary (its bytes are
  sampled in scan order): each blob by its hash, size and depth, the seed as ``<seed>``;
- the temporary folder the vault sits in (``vaults.root``, ``dendron_vaults.workspace``): ``<tmp>``.

Every other column of every table is compared as written (the files' mtimes are fixed by the caller, so
``mtime_ns``, ``updated_at`` and ``created_at`` are too).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import apsw

_SKIPPED_TABLES = (
    "_migrations",  # the schema's history, not what an index wrote (and every part of the work adds to it)
    "notes_fts_data",
    "notes_fts_idx",
    "tool_invocations_fts_data",
    "tool_invocations_fts_idx",
)
_DROPPED = {
    "_migrations": {"applied_at"},
    "notes": {"indexed_at"},
    "vaults": {"added_at", "last_indexed_at", "index_state"},  # (index_state: asserted NULL by the test itself)
    "history_versions": {"vid", "at"},
    "history_blobs": {"data"},
    "history_notes": {"deleted_at"},
}


def _rows(conn: apsw.Connection, sql: str) -> list[tuple]:
    return [tuple(r) for r in conn.execute(sql)]


def dump(conn: apsw.Connection, tmp: str) -> dict[str, list[list[Any]]]:
    """Each table's rows, normalised (see the module's docstring) and sorted."""
    vaults = dict(_rows(conn, "SELECT id, name FROM vaults"))
    notes = {rid: f"{vaults[vid]}:{path}" for rid, vid, path in _rows(conn, "SELECT rid, vault_id, path FROM notes")}
    ids = {nid: notes[rid] for rid, nid in _rows(conn, "SELECT rid, id FROM notes")}
    seeds = {bid for (bid,) in _rows(conn, "SELECT bid FROM history_dicts")}
    blobs = {bid: ("<seed>" if bid in seeds else h) for bid, h in _rows(conn, "SELECT bid, hash FROM history_blobs")}
    lines = {
        hid: notes.get(rid, f"{vaults.get(vid)}:{path} (gone)")
        for hid, vid, rid, path in _rows(conn, "SELECT hid, vault_id, rid, path FROM history_notes")
    }
    maps: dict[str, dict] = {
        "rid": notes,
        "src_rid": notes,
        "dst_rid": notes,
        "vault_id": vaults,
        "note_id": ids,
        "hid": lines,
        "bid": blobs,
        "base": blobs,
        "last_bid": blobs,
    }
    out: dict[str, list[list[Any]]] = {}
    tables = [
        t
        for (t,) in _rows(conn, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        if not t.startswith("sqlite_") and t not in _SKIPPED_TABLES
    ]
    for table in tables:
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info('{table}')")]
        if table == "notes_fts" or table == "tool_invocations_fts":
            continue  # external content (a view over notes) or a log's: the vocabulary below stands for it
        dropped = _DROPPED.get(table, set())
        rows = []
        for row in _rows(conn, f"SELECT * FROM {table}"):
            norm: list[Any] = []
            for col, value in zip(cols, row, strict=True):
                if col in dropped:
                    continue
                if table == "vaults" and col == "id":
                    value = vaults[value]
                elif table == "notes" and col == "id":
                    value = ids[value]
                elif table == "notes" and col == "hidden_at":
                    value = value is not None
                elif table == "notes_fts_docsize" and col == "id":
                    value = notes.get(value, value)
                elif table == "history_blobs" and col in ("hash", "size") and row[0] in seeds:
                    value = "<seed>"
                elif col in maps and value is not None:
                    value = maps[col].get(value, f"<unknown {col} {value}>")
                if isinstance(value, str) and tmp in value:
                    value = value.replace(tmp, "<tmp>")
                if isinstance(value, bytes):
                    value = hashlib.sha256(value).hexdigest()
                norm.append(value)
            rows.append(norm)
        out[table] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.dump_vocab USING fts5vocab(main, notes_fts, instance)")
    out["notes_fts (instances)"] = sorted(
        [notes.get(doc, doc), term, col, offset]
        for term, doc, col, offset in _rows(conn, "SELECT term, doc, col, offset FROM temp.dump_vocab")
    )
    conn.execute("DROP TABLE temp.dump_vocab")
    return out


def digests(tables: dict[str, list[list[Any]]]) -> dict[str, list[Any]]:
    """Per table: [row count, sha256 of its sorted rows as JSON] (the committed reference is this)."""
    return {
        table: [len(rows), hashlib.sha256(json.dumps(rows, default=str).encode()).hexdigest()]
        for table, rows in sorted(tables.items())
    }
