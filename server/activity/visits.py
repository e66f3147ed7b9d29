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

from server.activity.session_registry import touch_session
from server.store.db import rows
from server.vault.scope import Vaults, VaultScope

MAX_PROJECT_CHARS = 500
SESSION_ACTORS = ("agent", "capture")  # writes made for an agent session: its own, and kms's session note
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
        self._recorded: tuple[str | None, str | None] | None = None  # (project, vault) last put on the row
        self._lock = threading.Lock()

    @property
    def project(self) -> str | None:
        with self._lock:
            return self._project

    def use(
        self,
        conn: apsw.Connection,
        project: str | None = None,
        *,
        kind: str = "server",
        vault: str | None = None,
        now: float | None = None,
    ) -> str | None:
        """Take ``project`` (when given) as this session's identity and record it on the session row."""

        with self._lock:
            if project is not None:
                self._project = normalize_project(project)
            current = self._project
            fresh = self._recorded != (current, vault)
            self._recorded = (current, vault)
        if fresh:  # the row has it already otherwise (the heartbeat keeps it seen)
            touch_session(conn, self.session_id, kind=kind, project=current, vault=vault, now=now)
        return current


def previous_visit(
    conn: apsw.Connection, project: str, session_id: str, now: float | None = None
) -> dict[str, Any] | None:
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
WHERE n.{col} > :since AND +n.hidden_at IS NULL {scope} ORDER BY n.{col} DESC, {tie} LIMIT :limit
"""
TIE = {"updated_at": "n.id", "created_at": "n.rid DESC"}  # each index's own order: streamed, never sorted
COUNT_CAP = 500  # counted exactly up to here (each counted note is a row read), then "at least"


def changes_since(conn: apsw.Connection, since: float, vault_id: Vaults = None, limit: int = 15) -> dict[str, Any]:
    """Visible notes created or edited after ``since`` (newest first, at most ``limit``), each with who.

    The newest by edit time and the newest by creation time are each read down their own index and
    merged (the top ``limit`` by the later of the two times are in one of them), so a vault of any size
    costs a few dozen row reads; the counts stop at ``COUNT_CAP``."""
    # '+': the time indexes find the changed notes, not the visible-notes or the vault index (which
    # would read every note row of the vault)
    scope, scope_params = VaultScope.of(vault_id).named_sql("+n.vault_id")
    params: dict[str, Any] = {"since": since, **scope_params, "limit": limit, "cap": COUNT_CAP + 1}
    picked: dict[str, dict[str, Any]] = {}
    for col in ("updated_at", "created_at"):
        for r in rows(conn, _CHANGED.format(col=col, tie=TIE[col], scope=scope), params):
            picked[r["noteId"]] = r
    found = sorted(picked.values(), key=lambda r: (-max(r["updated_at"], r["created_at"]), r["noteId"]))[:limit]

    def count(cond: str) -> int:
        return int(
            rows(
                conn,
                f"""SELECT count(*) AS n FROM (SELECT 1 FROM notes n WHERE +n.hidden_at IS NULL
                                  {scope} AND {cond} LIMIT :cap)""",
                params,
            )[0]["n"]
        )

    changed, created = count("(n.updated_at > :since OR n.created_at > :since)"), count("n.created_at > :since")
    who = _editors(conn, found, since)
    notes = [
        {
            "noteId": r["noteId"],
            "title": r["title"],
            "path": r["path"],
            "vault": r["vault"],
            "change": "created" if r["created_at"] > since else "edited",
            "at": max(r["updated_at"], r["created_at"]),
            "by": who[r["noteId"]],
        }
        for r in found
    ]
    out: dict[str, Any] = {
        "created": min(created, COUNT_CAP),
        "edited": max(0, min(changed, COUNT_CAP) - created),
        "notes": notes,
        "more": max(0, min(changed, COUNT_CAP) - len(notes)),
    }
    if changed > COUNT_CAP:
        out["countsAtLeast"] = True  # more changed than were counted
    return out


WRITES_CAP = 5_000  # the newest successful writes since the visit that are matched to the changed notes


def _editors(conn: apsw.Connection, notes: list[dict[str, Any]], since: float) -> dict[str, list[dict[str, Any]]]:
    """Who changed each of ``notes`` after ``since``: the agent sessions whose successful writes touched it
    (oldest first; a multi-file call through its per-file rows) and the person when the note's current
    version is not one an agent left, or a person's revert touched it."""
    out: dict[str, list[dict[str, Any]]] = {n["noteId"]: [] for n in notes}
    if not notes:
        return out
    # provenance ids grow with time: walk back from the newest to the visit (no index on `at` needed)
    first = rows(conn, "SELECT id FROM tool_invocations WHERE at <= ? ORDER BY id DESC LIMIT 1", (since,))
    after = first[0]["id"] if first else 0
    by_note = {n["noteId"]: n for n in notes}
    by_path = {(n["vault"], n["path"]): n["noteId"] for n in notes}
    files: dict[int, list[tuple[str, str]]] = {}
    for inv, path, digest in conn.execute(
        "SELECT invocation_id, coalesce(new_path, path), hash_after FROM tool_file_changes WHERE invocation_id > ?",
        (after,),
    ):
        files.setdefault(inv, []).append((path, digest))
    writes: dict[str, list[tuple[str, str, str | None]]] = {}  # note -> (actor, session, hash after)
    projects: dict[str, str | None] = {}
    for w in rows(
        conn,
        """SELECT i.id, i.session_id, i.actor, i.note_id, i.vault, i.hash_after, s.project
                           FROM tool_invocations i LEFT JOIN sessions s ON s.id = i.session_id
                           WHERE i.id > ? AND i.status = 'success' ORDER BY i.id LIMIT ?""",
        (after, WRITES_CAP),
    ):
        projects[w["session_id"]] = w["project"]
        touched = [(nid, w["hash_after"]) for nid in (w["note_id"],) if nid in by_note]
        touched += [(by_path[(w["vault"], p)], h) for p, h in files.get(w["id"], []) if (w["vault"], p) in by_path]
        for nid, digest in touched:
            writes.setdefault(nid, []).append((w["actor"], w["session_id"], digest))
    for nid, note in by_note.items():
        mine = writes.get(nid, [])
        seen: list[str] = []
        for actor, session, _digest in mine:
            if actor in SESSION_ACTORS and session not in seen:
                seen.append(session)
        out[nid] = [{"agent": sid, "project": projects.get(sid)} for sid in seen]
        if not mine or mine[-1][2] != note["content_hash"] or any(a not in SESSION_ACTORS for a, _s, _d in mine):
            out[nid].append({"person": True})
    return out
