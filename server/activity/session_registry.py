"""Agent sessions (table ``sessions``, m002): who is connected, since when, how it ended.

A session is born either in the launcher (``kms claude`` records it before spawning
claude, kind ``launcher``) or in an MCP server started by some other host (kind
``server``). The launcher passes its id to the kms server as ``KMS_SESSION_ID`` so the
server's ``touch_session`` updates the same row instead of making a second one; the
dashboard reads ``list_sessions``. Every write goes through ``write_tx`` (BEGIN IMMEDIATE).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from server.config.session_contract import new_session_id
from server.store.db import rows, write_tx

# host: a session of an agent host that runs kms's hooks on its own (`kms hooks install`, a plugin), not one
# `kms claude` launched: its hooks are all kms hears of it
KINDS = ("launcher", "server", "demo", "person", "host")


@dataclass(frozen=True)
class SessionRow:
    id: str
    kind: str
    started_at: float
    last_seen_at: float
    ended_at: float | None
    pid: int | None
    cwd: str | None
    argv: list[str] | None
    exit_code: int | None
    vault: str | None
    project: str | None = None  # the identity it works for (m012): kms claude's working directory, a host's project
    control: str = "active"  # the person's control (m013): active, paused, revoked (server.activity.control)
    control_at: float | None = None
    control_reason: str | None = None

    @property
    def active(self) -> bool:
        return self.ended_at is None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "started_at": self.started_at,
            "last_seen_at": self.last_seen_at,
            "ended_at": self.ended_at,
            "pid": self.pid,
            "cwd": self.cwd,
            "argv": self.argv,
            "exit_code": self.exit_code,
            "vault": self.vault,
            "project": self.project,
            "control": self.control,
            "control_at": self.control_at,
            "control_reason": self.control_reason,
        }


def _row(d: dict[str, Any]) -> SessionRow:
    argv = json.loads(d["argv"]) if d.get("argv") else None
    return SessionRow(**{**d, "argv": argv})


def start_session(
    conn: apsw.Connection,
    *,
    kind: str = "launcher",
    session_id: str | None = None,
    pid: int | None = None,
    cwd: str | None = None,
    argv: Sequence[str] | None = None,
    vault: str | None = None,
    project: str | None = None,
    now: float | None = None,
) -> str:
    """Record a new session and return its id (``pid`` defaults to this process)."""
    if kind not in KINDS:
        raise ValueError(f"session kind must be one of {KINDS}, not {kind!r}")
    sid = session_id or new_session_id()
    at = time.time() if now is None else now
    with write_tx(conn):
        conn.execute(
            "INSERT INTO sessions (id, kind, started_at, last_seen_at, pid, cwd, argv, vault, project)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                sid,
                kind,
                at,
                at,
                os.getpid() if pid is None else pid,
                cwd if cwd is not None else os.getcwd(),
                json.dumps(list(argv)) if argv is not None else None,
                vault,
                project,
            ),
        )
    return sid


def touch_session(
    conn: apsw.Connection,
    session_id: str,
    *,
    kind: str = "server",
    pid: int | None = None,
    cwd: str | None = None,
    vault: str | None = None,
    project: str | None = None,
    now: float | None = None,
) -> None:
    """Mark a session as seen now; create it (kind ``server``) if nobody recorded it yet.

    An existing row keeps its kind, pid and cwd: the launcher's record is the truth. ``project``
    (given) replaces the row's: a host may name its project in kms_start after the session began.
    """
    at = time.time() if now is None else now
    with write_tx(conn):
        conn.execute(
            "INSERT INTO sessions (id, kind, started_at, last_seen_at, pid, cwd, vault, project)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(id) DO UPDATE SET last_seen_at = excluded.last_seen_at,"
            " vault = coalesce(sessions.vault, excluded.vault),"
            " project = coalesce(excluded.project, sessions.project)",
            (
                session_id,
                kind,
                at,
                at,
                os.getpid() if pid is None else pid,
                cwd if cwd is not None else os.getcwd(),
                vault,
                project,
            ),
        )


def end_session(conn: apsw.Connection, session_id: str, exit_code: int | None, *, now: float | None = None) -> bool:
    """Record the end and exit code; True if the session existed."""
    at = time.time() if now is None else now
    with write_tx(conn):
        conn.execute(
            "UPDATE sessions SET ended_at = ?, last_seen_at = max(last_seen_at, ?), exit_code = ? WHERE id = ?",
            (at, at, exit_code, session_id),
        )
        return conn.changes() > 0


def get_session(conn: apsw.Connection, session_id: str) -> SessionRow | None:
    found = rows(conn, "SELECT * FROM sessions WHERE id = ?", (session_id,))
    return _row(found[0]) if found else None


def list_sessions(
    conn: apsw.Connection,
    *,
    active: bool | None = None,
    kind: str | None = None,
    limit: int = 50,
) -> list[SessionRow]:
    """Newest first; ``active=True`` only unended sessions, ``False`` only ended ones."""
    where: list[str] = []
    params: list[object] = []
    if active is not None:
        where.append("ended_at IS NULL" if active else "ended_at IS NOT NULL")
    if kind is not None:
        where.append("kind = ?")
        params.append(kind)
    sql = "SELECT * FROM sessions"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY started_at DESC, id LIMIT ?"
    params.append(limit)
    return [_row(r) for r in rows(conn, sql, tuple(params))]


def session_counts(conn: apsw.Connection) -> dict[str, dict[str, int]]:
    """Per session: agent write calls (and how many were refused) and notes read (``kms session list``)."""
    out: dict[str, dict[str, int]] = {}
    for sid, calls, refused in conn.execute(
        "SELECT session_id, count(*), sum(status != 'success') FROM tool_invocations WHERE actor = 'agent'"
        " GROUP BY session_id"
    ):
        out[sid] = {"calls": calls, "refused": refused or 0, "reads": 0}
    for sid, reads in conn.execute("SELECT session_id, count(*) FROM note_reads GROUP BY session_id"):
        out.setdefault(sid, {"calls": 0, "refused": 0, "reads": 0})["reads"] = reads
    return out


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists (an unended session whose pid is gone crashed)."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
