"""Open conflicts between two versions of one note (a sync tool's conflict copy, a git merge that did not
merge cleanly): listed with the note, resolved by the person.

# lead: h-sync owns this; stub until merge
"""

from __future__ import annotations

import time
from typing import Any

import apsw

from server.store.db import rows, write_tx


def open_conflict(
    conn: apsw.Connection,
    *,
    vault_id: int,
    path: str,
    source: str,
    copy_path: str | None = None,
    mine: bytes | None = None,
    theirs: bytes | None = None,
    base: bytes | None = None,
) -> int:
    """Open a conflict on the note at ``path``; its id."""
    with write_tx(conn):
        conn.execute(
            "INSERT INTO conflicts(vault_id, path, copy_path, source, mine, theirs, base, opened_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (vault_id, path, copy_path, source, mine, theirs, base, time.time()),
        )
        return int(conn.last_insert_rowid())


def open_conflicts(conn: apsw.Connection, vault_id: int | None = None) -> list[dict[str, Any]]:
    """The conflicts not resolved yet (of one vault, or every vault), oldest first."""
    return rows(
        conn,
        "SELECT * FROM conflicts WHERE resolved_at IS NULL AND (? IS NULL OR vault_id = ?) ORDER BY id",
        (vault_id, vault_id),
    )


def open_for(conn: apsw.Connection, vault_id: int, path: str) -> dict[str, Any] | None:
    """The open conflict on this note, if any."""
    found = rows(
        conn,
        "SELECT * FROM conflicts WHERE vault_id = ? AND path = ? AND resolved_at IS NULL ORDER BY id LIMIT 1",
        (vault_id, path),
    )
    return found[0] if found else None


def resolve(conn: apsw.Connection, conflict_id: int, resolution: str) -> None:
    """Mark a conflict resolved (how: ``resolution``)."""
    with write_tx(conn):
        conn.execute(
            "UPDATE conflicts SET resolved_at = ?, resolution = ? WHERE id = ? AND resolved_at IS NULL",
            (time.time(), resolution, conflict_id),
        )
