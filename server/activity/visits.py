"""Who an agent session works for, and what changed in the notes since that identity was last here.

An identity is a *project*: ``kms claude`` passes its working directory (``KMS_PROJECT``), a host
may name one in ``kms_start(project)``, and a server given neither uses its own working directory
(a host starts it in the project's folder) unless that is ``/`` or the home folder, which say
nothing. It is recorded on the session row (``sessions.project``, m012), so the next session of the
same identity finds where the previous one ended.

"What changed" is every visible note created or edited since then, with who: the agent sessions
whose successful writes touched it (provenance rows, per-file change rows for multi-file calls) and
"person" when the note's current version is not one an agent left (or a person reverted a write).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import apsw

from server.store.db import rows

MAX_PROJECT_CHARS = 500
STALE_S = 120.0  # an unended session unseen this long crashed: its last heartbeat is when it left


def normalize_project(project: str | None) -> str | None:
    """One spelling per identity: trimmed, a path without a trailing slash; None for nothing."""
    if project is None:
        return None
    text = project.strip()
    if len(text) > 1:
        text = text.rstrip("/\\") or text
    return text or None


def default_project(configured: str | None, cwd: str | None = None) -> str | None:
    """The identity a session has before any ``kms_start(project)``: the configured one, else the
    server's working directory when it names a project (not ``/``, not the home folder)."""
    if configured:
        return normalize_project(configured)
    try:
        here = Path(cwd or os.getcwd()).resolve()
    except OSError:
        return None
    if here == Path(here.anchor) or here == Path.home().resolve():
        return None
    return str(here)


class SessionIdentity:
    """The project one server's session works for; ``kms_start(project)`` may name another. Thread-safe."""

    def __init__(self, session_id: str, configured: str | None) -> None:
        self.session_id = session_id
        self._project = default_project(configured)
        self._lock = threading.Lock()

    @property
    def project(self) -> str | None:
        with self._lock:
            return self._project

    def use(self, conn: apsw.Connection, project: str | None = None, *, kind: str = "server",
            vault: str | None = None, now: float | None = None) -> str | None:
        """Take ``project`` (when given) as this session's identity and record it on the session row."""
        from server.activity.sessions import touch_session

        with self._lock:
            if project is not None:
                self._project = normalize_project(project)
            current = self._project
        touch_session(conn, self.session_id, kind=kind, project=current, vault=vault, now=now)
        return current


def previous_visit(conn: apsw.Connection, project: str, session_id: str,
                   now: float | None = None) -> dict[str, Any] | None:
    """The latest other session of ``project`` that has left (ended, or unseen for ``STALE_S``): its id
    and when it left. None on a first visit. Sessions still running beside this one do not count."""
    at = time.time() if now is None else now
    found = rows(
        conn,
        """SELECT id, kind, coalesce(ended_at, last_seen_at) AS leftAt FROM sessions
           WHERE project = ? AND id != ? AND (ended_at IS NOT NULL OR last_seen_at < ?)
           ORDER BY leftAt DESC, id LIMIT 1""",
        (project, session_id, at - STALE_S),
    )
    return found[0] if found else None


_CHANGED = """
SELECT n.id AS noteId, n.title, n.path, v.name AS vault, n.content_hash, n.created_at, n.updated_at
FROM notes n JOIN vaults v ON v.id = n.vault_id
WHERE n.hidden_at IS NULL {scope} AND (n.updated_at > :since OR n.created_at > :since)
ORDER BY max(n.updated_at, n.created_at) DESC, n.id ASC
"""


def changes_since(conn: apsw.Connection, since: float, vault_id: int | None = None,
                  limit: int = 15) -> dict[str, Any]:
    """Visible notes created or edited after ``since`` (newest first, at most ``limit``), each with who."""
    scope = "AND n.vault_id = :vault" if vault_id is not None else ""
    params: dict[str, Any] = {"since": since, "vault": vault_id}
    found = rows(conn, _CHANGED.format(scope=scope) + " LIMIT :limit", {**params, "limit": limit})
    counts = rows(conn, f"""SELECT count(*) AS changed, coalesce(sum(n.created_at > :since), 0) AS created
                            FROM notes n WHERE n.hidden_at IS NULL {scope}
                              AND (n.updated_at > :since OR n.created_at > :since)""", params)[0]
    notes = []
    for r in found:
        who = _editors(conn, r, since)
        notes.append({"noteId": r["noteId"], "title": r["title"], "path": r["path"], "vault": r["vault"],
                      "change": "created" if r["created_at"] > since else "edited",
                      "at": max(r["updated_at"], r["created_at"]), "by": who})
    return {"created": counts["created"], "edited": counts["changed"] - counts["created"], "notes": notes,
            "more": max(0, counts["changed"] - len(notes))}


def _editors(conn: apsw.Connection, note: dict[str, Any], since: float) -> list[dict[str, Any]]:
    """Who changed ``note`` after ``since``: agent sessions (oldest write first) and the person."""
    writes = rows(
        conn,
        """SELECT i.id, i.session_id, i.actor, coalesce(f.hash_after, i.hash_after) AS hash_after,
                  s.project, s.kind
           FROM tool_invocations i LEFT JOIN sessions s ON s.id = i.session_id
           LEFT JOIN tool_file_changes f ON f.invocation_id = i.id AND coalesce(f.new_path, f.path) = :path
           WHERE i.status = 'success' AND i.at > :since AND i.vault = :vault
             AND (i.note_id = :id OR f.invocation_id IS NOT NULL)
           ORDER BY i.id""",
        {"since": since, "id": note["noteId"], "path": note["path"], "vault": note["vault"]},
    )
    who: list[dict[str, Any]] = []
    seen: set[str] = set()
    for w in writes:
        if w["actor"] == "agent" and w["session_id"] not in seen:
            seen.add(w["session_id"])
            who.append({"agent": w["session_id"], "project": w["project"]})
    person = not writes or writes[-1]["hash_after"] != note["content_hash"] or any(
        w["actor"] != "agent" for w in writes)
    if person:
        who.append({"person": True})
    return who
