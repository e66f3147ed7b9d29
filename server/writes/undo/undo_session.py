"""Undo a whole session: revert every successful change one agent session made, newest first.

``preview`` lists what would be reverted and what cannot be (text changed since, file gone: the reason
the revert rules give: ``revert.plan_revert``, a ``FilesChanged`` only while every file is what it left),
nothing written; ``undo`` then reverts, newest first, each change the preview did not rule out, through
the one ``revert.revert`` (each recorded by the person, with ``reverts_id``). The preview judges each
change against the files as reverting the session's newer changes would leave them (simulated in
memory), so two edits of one note come back byte for byte and a note another session changed since
is listed as skipped, not promised.

The notes the session changed outside kms (its agent's own Edit/Write, reported by its hooks) are in the
same preview and the same undo (``server.writes.undo.undo_outside``): restored first, each only while it holds
what the preview saw (``undo``'s ``shown``), then the kms changes are reverted as above.
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
from server.writes.undo import undo_outside
from server.writes.undo.revert import plan_revert, revert


def parse_since(text: str | None, *, now: float | None = None) -> float | None:
    """``--since``: a duration back from now (``30m``, ``2h``) or a local date-time (``2026-12-01 10:30``)."""
    if text is None or not text.strip():
        return None
    from server.writes.undo.trash import parse_duration

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
    if not any(
        rows(conn, sql, (session_id,))
        for sql in (
            "SELECT 1 FROM sessions WHERE id = ?",
            "SELECT 1 FROM tool_invocations WHERE session_id = ? LIMIT 1",
            "SELECT 1 FROM session_files WHERE session_id = ? LIMIT 1",
        )
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
    """What ``undo`` would do now: ``revert`` (newest first) and ``skip``, each skip with its reason;
    ``outside``: the notes the session changed outside kms that are restored (``undo_outside.plan``: each
    with its action, version, size change and the kms calls it covers), ``outsideSkip`` those that are not."""
    out: dict[str, Any] = {"sessionId": session_id, "since": since, "revert": [], "skip": []}
    found = _changes(conn, session_id, since)
    undo_outside.catch_up(conn, session_id, since)
    outside = undo_outside.plan(conn, session_id, since)
    sim = _Simulation(conn)
    covered: set[int] = set()
    for note in outside["restore"]:  # restored first: the kms changes are judged on what that leaves
        sim.files[(note["vault"], note["path"])] = note["data"]
        covered.update(c["invocationId"] for c in note["covers"])
    for row in found:
        if row["id"] in covered:
            continue  # the note goes back to before the session's outside edit, this change with it
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
    out["outside"] = [undo_outside.public(n) for n in outside["restore"]]
    out["outsideSkip"] = [undo_outside.public(n) for n in outside["skip"]]
    return out


def undo(
    conn: apsw.Connection, session_id: str, *, since: float | None = None, shown: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Restore the notes the session changed outside kms, then revert every change ``preview`` lists as
    revertible, newest first; returns what was done and what was not (``skipped``, ``notRestored``: the
    preview's refusals, and any refused now because the note changed meanwhile). ``shown``: the preview the
    person saw: a note is restored only while it holds what that preview saw, and only if it listed it."""
    plan = preview(conn, session_id, since=since)
    seen = None if shown is None else {(n["vault"], n["path"]): n["expect"] for n in shown.get("outside", [])}
    restored: list[dict[str, Any]] = []
    refused = [  # a note the person saw listed as restorable that someone changed since
        {**n, "reason": f"changed since the preview: {n['reason']}"} if seen and (n["vault"], n["path"]) in seen else n
        for n in plan["outsideSkip"]
    ]
    for note in plan["outside"]:
        key = (note["vault"], note["path"])
        expect = note["expect"] if seen is None else seen.get(key)
        if expect is None:
            refused.append({**note, "reason": "it was not in the preview; left as it is", "errorKind": "conflict"})
            continue
        try:
            result = undo_outside.apply(conn, note, session_id, expect)
        except KmsError as e:
            refused.append({**note, "reason": e.message, "errorKind": e.kind})
            continue
        restored.append({**note, "restoreId": result.get("invocationId")})
    kept = {(n["vault"], n["path"]) for n in refused[len(plan["outsideSkip"]) :]}  # refused just now
    done: list[dict[str, Any]] = []
    skipped = list(plan["skip"])
    for item in plan["revert"]:
        if (item["vault"], item["path"]) in kept:
            skipped.append({**item, "reason": "the note was not restored (above); its kms changes are left too"})
            continue
        try:
            result = revert(conn, item["invocationId"])
        except KmsError as e:
            skipped.append({**item, "reason": e.message})
            continue
        done.append({**item, "reason": None, "revertId": result.get("invocationId")})
    return {
        "sessionId": session_id,
        "since": since,
        "reverted": done,
        "skipped": skipped,
        "restored": restored,
        "notRestored": refused,
    }
