"""Issue 37: a ``kms claude`` session token is a lease. Renewing pushes a live one ahead; a lapsed or revoked
one is never renewed again; the sessions whose lease lapsed are ended at the lapse (once), never those of a
live lease, a revoked token (the launcher ends those itself) or another kind of token."""

from __future__ import annotations

import apsw

from server.activity import tokens
from server.activity.sessions import get_session, start_session
from server.config.scopes import Scopes

T0 = 1_800_000_000.0


def session_token(conn: apsw.Connection, sid: str, lease: float = 90.0) -> tokens.Token:
    start_session(conn, kind="launcher", session_id=sid, now=T0)
    token, _secret = tokens.create(
        conn,
        label=f"kms claude {sid}",
        scopes=Scopes.parse("tier:read"),
        kind="session",
        session_id=sid,
        expires_in_s=lease,
        now=T0,
    )
    return token


def test_a_live_lease_is_renewed_and_a_lapsed_or_revoked_one_is_not(conn: apsw.Connection) -> None:
    live, lapsed, revoked = (session_token(conn, sid) for sid in ("slive", "slapsed", "srevoked"))
    tokens.revoke(conn, revoked.id, now=T0 + 1)
    assert tokens.renew_lease(conn, live.id, 90, now=T0 + 60)
    assert tokens.get(conn, live.id).expires_at == T0 + 150
    assert not tokens.renew_lease(conn, lapsed.id, 90, now=T0 + 91)
    assert tokens.get(conn, lapsed.id).state(T0 + 91) == "expired"
    assert not tokens.renew_lease(conn, revoked.id, 90, now=T0 + 60)
    host, _s = tokens.create(conn, label="host:cursor", scopes=Scopes.parse("tier:read"), expires_in_s=90, now=T0)
    assert not tokens.renew_lease(conn, host.id, 90, now=T0 + 60), "only a session token is a lease"


def test_the_sessions_of_lapsed_leases_end_at_the_lapse_once(conn: apsw.Connection) -> None:
    live = session_token(conn, "slive")
    session_token(conn, "slapsed", lease=30)
    tokens.revoke(conn, session_token(conn, "srevoked", lease=30).id, now=T0 + 1)
    assert tokens.end_lapsed_sessions(conn, now=T0 + 20) == []
    assert tokens.renew_lease(conn, live.id, 90, now=T0 + 60)
    assert tokens.end_lapsed_sessions(conn, now=T0 + 100) == ["slapsed"]
    row = get_session(conn, "slapsed")
    assert row is not None and row.ended_at == T0 + 30 and row.exit_code is None
    for sid in ("slive", "srevoked"):  # renewed; revoked (the launcher ends it itself, with the exit code)
        other = get_session(conn, sid)
        assert other is not None and other.ended_at is None, sid
    assert tokens.end_lapsed_sessions(conn, now=T0 + 100) == [], "once"
