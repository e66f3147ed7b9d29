"""Undo a whole session: revert every successful change one agent session made, newest first.

``preview`` lists what would be reverted and what cannot be (text changed since, file gone: the reason
``revert.preview_revert`` gives), nothing written; ``undo`` then reverts, newest first, each change
the preview did not rule out, through the one ``revert.revert`` (each recorded by the person, with
``reverts_id``). A change whose file a newer change of the same session touched is judged after that
one is undone, so two edits of one note come back byte for byte.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import apsw

from server.errors import KmsError
from server.store.db import rows
from server.writes.revert import preview_revert, revert

_NEEDS_NEWER = "revertible once the session's newer changes to this note are undone"


def parse_since(text: str | None, *, now: float | None = None) -> float | None:
    """``--since``: a duration back from now (``30m``, ``2h``) or a local date-time (``2026-12-01 10:30``)."""
    if text is None or not text.strip():
        return None
    from server.writes.trash import parse_duration

    if re.match(r"^\s*\d+\s*[smhdw]\s*$", text):
        return (time.time() if now is None else now) - parse_duration(text)
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise KmsError("invalid-input", f"{text!r} is neither a duration (30m, 2h, 1d) nor a date-time "
                       "(2026-12-01 10:30)") from None


def _changes(conn: apsw.Connection, session_id: str, since: float | None) -> list[dict[str, Any]]:
    """The session's successful agent changes not yet reverted, newest first."""
    if not rows(conn, "SELECT 1 FROM sessions WHERE id = ?", (session_id,)) and not rows(
            conn, "SELECT 1 FROM tool_invocations WHERE session_id = ? LIMIT 1", (session_id,)):
        raise KmsError("not-found", f"no session {session_id!r}; `kms session list` shows them", sessionId=session_id)
    return rows(conn, """
        SELECT t.id, t.at, t.tool, t.vault, t.path, t.note_id FROM tool_invocations t
         WHERE t.session_id = ? AND t.actor = 'agent' AND t.status = 'success' AND t.change_kind IS NOT NULL
           AND t.at >= ? AND NOT EXISTS (SELECT 1 FROM tool_invocations r
                                          WHERE r.reverts_id = t.id AND r.status = 'success')
         ORDER BY t.id DESC""", (session_id, since if since is not None else 0.0))


def _key(item: dict[str, Any]) -> tuple[Any, Any]:
    return item.get("vault"), item.get("noteId") or item.get("path")


def preview(conn: apsw.Connection, session_id: str, *, since: float | None = None) -> dict[str, Any]:
    """What ``undo`` would do now: ``revert`` (newest first) and ``skip`` (each with its reason)."""
    out: dict[str, Any] = {"sessionId": session_id, "since": since, "revert": [], "skip": []}
    undone_notes: set[tuple[Any, Any]] = set()
    for inv in _changes(conn, session_id, since):
        base = {"invocationId": inv["id"], "at": inv["at"], "tool": inv["tool"], "vault": inv["vault"],
                "path": inv["path"], "noteId": inv["note_id"]}
        try:
            p = preview_revert(conn, inv["id"])
        except KmsError as e:
            p = {"canRevert": False, "reason": e.message}
        item = {**base, "action": p.get("action"), "reason": p.get("reason")}
        if p.get("canRevert"):
            out["revert"].append(item)
            undone_notes.add(_key(base))
        elif _key(base) in undone_notes:  # a newer change of this session to the note goes first
            out["revert"].append({**item, "reason": _NEEDS_NEWER})
        else:
            out["skip"].append(item)
    return out


def undo(conn: apsw.Connection, session_id: str, *, since: float | None = None,
         lock_dir: Path | None = None) -> dict[str, Any]:
    """Revert every change ``preview`` lists as revertible, newest first; returns what was reverted and what
    was skipped (the preview's skips, and any revert refused now because the note changed meanwhile)."""
    plan = preview(conn, session_id, since=since)
    done: list[dict[str, Any]] = []
    skipped = list(plan["skip"])
    for item in plan["revert"]:
        try:
            result = revert(conn, item["invocationId"], lock_dir=lock_dir)
        except KmsError as e:
            skipped.append({**item, "reason": e.message})
            continue
        done.append({**item, "reason": None, "revertId": result.get("invocationId")})
    return {"sessionId": session_id, "since": since, "reverted": done, "skipped": skipped}
