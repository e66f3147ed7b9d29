"""Undo a whole session: revert every successful change one agent session made, newest first.

``preview`` lists what would be reverted and what cannot be (text changed since, file gone: the reason
the revert rules give: ``revert.plan_revert``, a ``FilesChanged`` only while every file is what it left),
nothing written; ``undo`` then reverts, newest first, each change the preview did not rule out, through
the one ``revert.revert`` (each recorded by the person, with ``reverts_id``). The preview judges each
change against the files as reverting the session's newer changes would leave them (simulated in
memory), so two edits of one note come back byte for byte and a note another session changed since
is listed as skipped, not promised.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any

import apsw

from server.activity import changes, provenance
from server.activity.changes import FilesChanged
from server.errors import KmsError
from server.store.db import rows
from server.vault.files import decode, encode, sha256_hex
from server.vault.paths import locate_note
from server.vault.registry import get_vault
from server.writes.revert import plan_revert, revert


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
        raise KmsError(
            "invalid-input", f"{text!r} is neither a duration (30m, 2h, 1d) nor a date-time (2026-12-01 10:30)"
        ) from None


def _changes(conn: apsw.Connection, session_id: str, since: float | None) -> list[dict[str, Any]]:
    """The session's successful agent changes not yet reverted, newest first."""
    if not rows(conn, "SELECT 1 FROM sessions WHERE id = ?", (session_id,)) and not rows(
        conn, "SELECT 1 FROM tool_invocations WHERE session_id = ? LIMIT 1", (session_id,)
    ):
        raise KmsError("not-found", f"no session {session_id!r}; `kms session list` shows them", sessionId=session_id)
    return rows(
        conn,
        """
        SELECT t.id, t.at, t.tool, t.vault, t.path, t.note_id FROM tool_invocations t
         WHERE t.session_id = ? AND t.actor = 'agent' AND t.status = 'success' AND t.change_kind IS NOT NULL
           AND t.at >= ? AND NOT EXISTS (SELECT 1 FROM tool_invocations r
                                          WHERE r.reverts_id = t.id AND r.status = 'success')
         ORDER BY t.id DESC""",
        (session_id, since if since is not None else 0.0),
    )


class _Simulation:
    """The session's files as they would be after the newer changes are reverted (bytes, None: gone), read
    from disk on first touch: each older change is judged against what reverting the newer ones leaves."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self.files: dict[tuple[str, str], bytes | None] = {}

    def get(self, vault: str, path: str) -> bytes | None:
        key = (vault, path)
        if key not in self.files:
            try:
                self.files[key] = locate_note(get_vault(self.conn, vault).root, path)[0].read_bytes()
            except (OSError, KmsError):
                self.files[key] = None
        return self.files[key]

    def judge(self, inv: dict[str, Any]) -> str | None:
        """Revert ``inv`` in the simulation; the reason it cannot be, or None (then it was applied)."""
        change = changes.from_row(inv)
        vault = inv["vault"]
        if not vault:
            return "the call names no vault"
        if isinstance(change, FilesChanged):
            for f in change.files:
                raw = self.get(vault, f.now_path)
                if raw is None:
                    return f"{f.now_path} is gone"
                if sha256_hex(raw) != f.hash_after:
                    return f"{f.now_path} was edited since"
            for f in change.files:
                raw = self.get(vault, f.now_path)
                assert raw is not None
                text, fmt = decode(raw)
                self.files[(vault, f.now_path)] = None if f.new_path else self.files[(vault, f.now_path)]
                self.files[(vault, f.path)] = encode(f.undo(text), fmt) if f.hash_before else None
            return None
        raw = self.get(vault, inv["path"] or "")
        if raw is None:
            return f"the note {inv['path']!r} no longer exists"
        text, fmt = decode(raw)
        plan = plan_revert(inv, text, sha256_hex(raw))
        if not plan.ok:
            return plan.reason or "it cannot be reverted"
        self.files[(vault, inv["path"])] = None if plan.action == "delete-note" else encode(plan.new_text or "", fmt)
        return None


def preview(conn: apsw.Connection, session_id: str, *, since: float | None = None) -> dict[str, Any]:
    """What ``undo`` would do now: ``revert`` (newest first) and ``skip``, each skip with its reason."""
    out: dict[str, Any] = {"sessionId": session_id, "since": since, "revert": [], "skip": []}
    sim = _Simulation(conn)
    for row in _changes(conn, session_id, since):
        inv = provenance.get_invocation(conn, row["id"]) or {}
        item = {
            "invocationId": row["id"],
            "at": row["at"],
            "tool": row["tool"],
            "vault": row["vault"],
            "path": row["path"],
            "noteId": row["note_id"],
        }
        reason = sim.judge(inv)
        if reason is None:
            out["revert"].append({**item, "reason": None})
        else:
            out["skip"].append({**item, "reason": reason})
    return out


def undo(conn: apsw.Connection, session_id: str, *, since: float | None = None) -> dict[str, Any]:
    """Revert every change ``preview`` lists as revertible, newest first; returns what was reverted and what
    was skipped (the preview's skips, and any revert refused now because the note changed meanwhile)."""
    plan = preview(conn, session_id, since=since)
    done: list[dict[str, Any]] = []
    skipped = list(plan["skip"])
    for item in plan["revert"]:
        try:
            result = revert(conn, item["invocationId"])
        except KmsError as e:
            skipped.append({**item, "reason": e.message})
            continue
        done.append({**item, "reason": None, "revertId": result.get("invocationId")})
    return {"sessionId": session_id, "since": since, "reverted": done, "skipped": skipped}
