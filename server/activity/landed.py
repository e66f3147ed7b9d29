"""Writes that landed under ``review.mode = after``: listed for the person to keep or undo in one action.

The write guard notes each agent call that changed a note while its session's mode was ``after`` (``note``, in
the call's own commit). ``listed`` answers the ones the person has not looked at yet, newest first, each with
what provenance says of it; a call undone since (a successful revert of it: ``kms revert ID``, the dashboard's
revert, a session undo) drops out by itself, and ``keep`` marks the rest as looked at. The CLI
(``kms pending --after``), the dashboard and the review page show this one query.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import apsw

from server.store.db import rows, write_tx

LIST_LIMIT = 200


def note(conn: apsw.Connection, invocation_id: int, session_id: str, *, now: float | None = None) -> None:
    """List call ``invocation_id`` for review after it landed (inside the caller's transaction, if any)."""
    conn.execute(
        "INSERT OR IGNORE INTO landed_writes (invocation_id, session_id, at) VALUES (?, ?, ?)",
        (invocation_id, session_id, time.time() if now is None else now),
    )


def listed(conn: apsw.Connection, *, limit: int = LIST_LIMIT) -> list[dict[str, Any]]:
    """The landed writes still waiting for the person's look, newest first (undone ones left out)."""
    return [
        {
            "invocationId": r["id"],
            "at": r["at"],
            "sessionId": r["session_id"],
            "tool": r["tool"],
            "vault": r["vault"],
            "path": r["path"],
            "noteId": r["note_id"],
            "inputSummary": r["input_summary"],
            "linesAdded": r["lines_added"],
            "message": r["message"],
        }
        for r in rows(
            conn,
            """SELECT t.id, t.at, t.session_id, t.tool, t.vault, t.path, t.note_id, t.input_summary, t.lines_added,
                      t.message
               FROM landed_writes l JOIN tool_invocations t ON t.id = l.invocation_id
               WHERE l.kept_at IS NULL
                 AND NOT EXISTS (SELECT 1 FROM tool_invocations r WHERE r.reverts_id = t.id AND r.status = 'success')
               ORDER BY l.invocation_id DESC LIMIT ?""",
            (limit,),
        )
    ]


def keep(conn: apsw.Connection, invocation_ids: Iterable[int], *, now: float | None = None) -> int:
    """The person looked at these landed writes and keeps them: no longer listed. Returns how many."""
    at = time.time() if now is None else now
    done = 0
    with write_tx(conn):
        for iid in invocation_ids:
            conn.execute(
                "UPDATE landed_writes SET kept_at = ? WHERE invocation_id = ? AND kept_at IS NULL", (at, int(iid))
            )
            done += conn.changes()
    return done
