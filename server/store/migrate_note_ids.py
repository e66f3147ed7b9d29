"""m057: the ids of notes indexed before ids were machine-independent, made again by today's rule.

A database made before the rule (random ids), or under its first form (made from the name the vault is
registered under, which two machines may spell differently), names its notes by ids no other machine
derives, so the provenance, reads, session records and history of one machine name notes the other cannot
find. The migration re-derives every note's id (``note_ids.new_note_id``: its carried id, else the vault
folder's name and the note's path now, which is what a machine indexing the vault for the first time
derives) and rewrites every table naming a note's public id, in the one transaction ``migrate`` holds:

- ``notes.id``; ``note_reads.note_id``; ``tool_invocations.note_id`` (provenance); ``session_records.note_id``
  (the session note); ``history_notes.note_id``.
- ``history_ids`` (every id a note's line was known by) gains the new id and keeps the old one, so an old id
  quoted in a transcript or a recorded answer still finds the note's history (``kms history OLD_ID``).

A deleted note's rows (provenance, its history line) keep the id it had: no machine derives one for it
any more, and ``history_ids`` still finds its line by it. Not rewritten either: text that quotes an id (a
recorded answer's JSON, a staged call's input, a note's own text): those are what was said at the time.
Everything else names a note by ``rid``, which does not change.

When two notes would derive one id (one frontmatter ``id`` copied into two notes), the older keeps it and the
other takes the next attempt (``new_note_id``'s ``attempt``), as an index would in the order it met them."""

from __future__ import annotations

import json

import apsw

from server.store.note_ids import carried_id, id_scope, new_note_id

# (table, column) of every public note id reference rewritten in place
ID_COLUMNS = (
    ("note_reads", "note_id"),
    ("tool_invocations", "note_id"),
    ("session_records", "note_id"),
    ("history_notes", "note_id"),
)


def derived_ids(conn: apsw.Connection) -> dict[int, tuple[str, str]]:
    """rid -> (id now, id by today's rule) for every note, oldest first taking a contested id."""
    scopes = {int(vid): id_scope(str(root)) for vid, root in conn.execute("SELECT id, root FROM vaults")}
    taken: set[str] = set()
    out: dict[int, tuple[str, str]] = {}
    for rid, old, vid, path, fm in conn.execute(
        "SELECT rid, id, vault_id, path, frontmatter FROM notes ORDER BY created_at, rid"
    ):
        try:
            props = json.loads(fm) if fm else None
        except ValueError:
            props = None
        carried = carried_id(props.get("id")) if isinstance(props, dict) else None
        attempt = 0
        new = new_note_id(scopes.get(vid, ""), path, carried)
        while new in taken:
            attempt += 1
            new = new_note_id(scopes.get(vid, ""), path, carried, attempt)
        taken.add(new)
        out[int(rid)] = (str(old), new)
    return out


def m057_machine_independent_ids(conn: apsw.Connection) -> None:
    """Re-derive every note's public id by the machine-independent rule and rewrite what names it."""
    changed = [(rid, old, new) for rid, (old, new) in derived_ids(conn).items() if old != new]
    if not changed:
        return
    conn.execute("CREATE TEMP TABLE m057_ids (rid INTEGER PRIMARY KEY, old TEXT NOT NULL UNIQUE, new TEXT NOT NULL)")
    try:
        conn.executemany("INSERT INTO m057_ids VALUES (?, ?, ?)", changed)
        # two steps: a note's new id may be another's id of now, and notes.id is UNIQUE at every row
        conn.execute("UPDATE notes SET id = '~m057~' || rid WHERE rid IN (SELECT rid FROM m057_ids)")
        conn.execute(
            "UPDATE notes SET id = (SELECT new FROM m057_ids m WHERE m.rid = notes.rid) "
            "WHERE rid IN (SELECT rid FROM m057_ids)"
        )
        for table, column in ID_COLUMNS:
            conn.execute(
                f"UPDATE OR REPLACE {table} SET {column} = (SELECT new FROM m057_ids WHERE old = {table}.{column}) "
                f"WHERE {column} IN (SELECT old FROM m057_ids)"
            )
        conn.execute(
            "INSERT OR REPLACE INTO history_ids "
            "SELECT m.new, h.hid FROM m057_ids m JOIN history_ids h ON h.note_id = m.old"
        )
    finally:
        conn.execute("DROP TABLE m057_ids")
