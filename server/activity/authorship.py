"""Who created a note and who last changed it, and how: what kms recorded, told to the agent.

kms knows a note's history only from its own provenance rows (``tool_invocations``, and
``tool_file_changes`` for the units of several files). A note's **creator** is the call that
created it (``kms_create``, one of ``kms_create_many``'s notes, ``kms_remember``); with no such
row the person made it (in their editor, or before kms). Its **last change** is the latest call
whose recorded bytes the note still holds (its ``content_hash`` is the call's hash after); when the
file holds bytes no call wrote, the person changed it last, outside kms, at the file's time.
Only the visible note asked about is looked up, and an answer names no other note (a rename's
row is told as its tool and session, never its path), so hidden notes never show.
"""

from __future__ import annotations

from typing import Any

import apsw

from server.activity.changes import FILE_CREATED
from server.activity.note_history import attribute_outside_change
from server.activity.visits import SESSION_ACTORS

_ROW = "t.id, t.at, t.actor, t.tool, t.session_id"


def _who(row: tuple[Any, ...] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    invocation, at, actor, tool, session = row
    return {
        "by": actor,
        "how": tool,
        "sessionId": session if actor in SESSION_ACTORS else None,
        "at": at,
        "invocationId": invocation,
    }


def _outside(at: float) -> dict[str, Any]:
    return {"by": "person", "how": "outside kms (an editor, a sync)", "sessionId": None, "at": at, "invocationId": None}


def _outside_change(conn: apsw.Connection, note_id: str, path: str, at: float, content_hash: str) -> dict[str, Any]:
    """A change no kms call made: the session whose hooks reported it, if one did (``history``'s one seam)."""

    vault = conn.execute("SELECT vault_id FROM notes WHERE id = ?", (note_id,)).fetchone()
    reported = attribute_outside_change(conn, int(vault[0]), path, at, content_hash or None) if vault else None
    if reported is None:
        return _outside(at)
    return {
        "by": "agent",
        "how": f"outside kms ({reported.tool}, reported by its session)",
        "sessionId": reported.session_id,
        "at": at,
        "invocationId": None,
    }


def last_change(conn: apsw.Connection, note_id: str, path: str, content_hash: str, updated_at: float) -> dict[str, Any]:
    """The call that wrote the bytes the note holds now, else the person (outside kms)."""
    found = conn.execute(
        f"""
        SELECT {_ROW} FROM tool_invocations t
        WHERE t.note_id = ? AND t.status = 'success' AND t.hash_after = ?
        UNION ALL
        SELECT {_ROW} FROM tool_file_changes f JOIN tool_invocations t ON t.id = f.invocation_id
        WHERE f.hash_after = ? AND coalesce(f.new_path, f.path) = ? AND t.status = 'success'
        ORDER BY 1 DESC LIMIT 1""",
        (note_id, content_hash, content_hash, path),
    ).fetchall()
    if found:
        return _who(found[0]) or _outside(updated_at)
    return _outside_change(conn, note_id, path, updated_at, content_hash)


def created(conn: apsw.Connection, note_id: str, path: str, created_at: float) -> dict[str, Any]:
    """The call that created the note, else the person."""
    found = conn.execute(
        f"""
        SELECT {_ROW} FROM tool_invocations t
        WHERE t.note_id = ? AND t.status = 'success' AND t.change_kind = ? AND t.reverts_id IS NULL
        UNION ALL
        SELECT {_ROW} FROM tool_file_changes f JOIN tool_invocations t ON t.id = f.invocation_id
        WHERE f.path = ? AND f.hash_before = '' AND t.status = 'success' AND t.reverts_id IS NULL
        ORDER BY 1 LIMIT 1""",
        (note_id, FILE_CREATED, path),
    ).fetchall()
    return _who(found[0] if found else None) or _outside(created_at)


def provenance(conn: apsw.Connection, note: dict[str, Any]) -> dict[str, Any]:
    """``createdBy`` and ``lastChangedBy`` of a visible note row (``id``, ``path``, ``content_hash``, times)."""
    return {
        "createdBy": created(conn, note["id"], note["path"], note["created_at"]),
        "lastChangedBy": last_change(conn, note["id"], note["path"], note["content_hash"], note["updated_at"]),
    }


def for_cards(conn: apsw.Connection, cards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each card (``noteId``, ``path``, ``updatedAt``: a listing's) with its ``lastChangedBy``."""
    hashes = (
        dict(
            conn.execute(
                f"SELECT id, content_hash FROM notes WHERE id IN ({','.join('?' * len(cards))})",
                [c["noteId"] for c in cards],
            )
        )
        if cards
        else {}
    )
    for c in cards:
        c["lastChangedBy"] = last_change(conn, c["noteId"], c["path"], hashes.get(c["noteId"], ""), c["updatedAt"])
    return cards
