"""A session's live state, set by the person: active, paused or revoked (``sessions.control``, m013).

Every write call of every server reads it first (the write guard, ``refusal``): one indexed lookup,
so pausing or revoking from the dashboard or ``kms session`` takes effect on a running server's
next call without restarting anything. Paused: writes answer ``paused`` until resumed. Revoked:
writes are refused for the rest of the session (reads keep working) and its calls waiting for
approval are rejected.
"""

from __future__ import annotations

import time

import apsw

from server.activity.approvals import reject_session
from server.activity.tokens import standing_for
from server.errors import KmsError
from server.store.db import write_tx

STATES = ("active", "paused", "revoked")


def state_of(conn: apsw.Connection, session_id: str) -> tuple[str, str | None]:
    """The session's state and the person's reason (``active`` for a session nobody recorded)."""
    for state, reason in conn.execute("SELECT control, control_reason FROM sessions WHERE id = ?", (session_id,)):
        return state, reason
    return "active", None


def refusal(conn: apsw.Connection, session_id: str) -> KmsError | None:
    """Why this session may not write right now (``paused`` or ``revoked``), or None."""
    state, reason = state_of(conn, session_id)
    if state == "active":
        return None
    why = f" ({reason})" if reason else ""
    if state == "paused":
        return KmsError(
            "paused",
            f"the person paused this session's writes{why}; nothing was written. Wait and "
            "retry later, or carry on with reads: the person resumes it from the dashboard or with "
            "`kms session resume`",
            sessionId=session_id,
        )
    return KmsError(
        "revoked",
        f"the person revoked this session's write access{why}; no write will be accepted "
        "for the rest of this session (reads keep working)",
        sessionId=session_id,
    )


def set_state(
    conn: apsw.Connection,
    session_id: str,
    state: str,
    *,
    reason: str | None = None,
    now: float | None = None,
    channel: str = "cli",
) -> str:
    """Set a session's state (``not-found`` for an unknown session; ``invalid-input`` to un-revoke one).
    Returns the state it had. Revoking rejects the session's calls waiting for approval (recorded as decided
    through ``channel``: ``cli`` or ``dashboard``)."""
    if state not in STATES:
        raise KmsError("invalid-input", f"a session state is one of {', '.join(STATES)}, not {state!r}")
    at = time.time() if now is None else now
    with write_tx(conn):
        found = list(conn.execute("SELECT control FROM sessions WHERE id = ?", (session_id,)))
        if not found:
            raise KmsError(
                "not-found", f"no session {session_id!r}; `kms session list` shows them", sessionId=session_id
            )
        before = found[0][0]
        if before == "revoked" and state != "revoked":
            raise KmsError(
                "invalid-input",
                f"session {session_id} is revoked for good; {_after_revoke(conn, session_id)}",
                sessionId=session_id,
            )
        conn.execute(
            "UPDATE sessions SET control = ?, control_at = ?, control_reason = ? WHERE id = ?",
            (state, at, reason, session_id),
        )
    if state == "revoked":
        reject_session(conn, session_id, "the person revoked this session", now=at, channel=channel)
    return str(before)


def _after_revoke(conn: apsw.Connection, session_id: str) -> str:
    """What the person does about a revoked session: a host token stands for its one session for good, so
    only a new token writes again (and the old one is best revoked); any other session: start a new one."""

    token = standing_for(conn, session_id)
    if token is None:
        return "start a new session"
    return (
        f"it is the session of token {token.id} ({token.label}), which can never write again: give its host a new "
        f"token with {token.renewal()}, then `kms token revoke {token.id}`"
    )


def revoked_note(conn: apsw.Connection, session_id: str) -> str:
    """What ``kms session revoke`` tells the person once a session is revoked."""
    return f"revoked (no more writes this session); {_after_revoke(conn, session_id)}"
