"""Issue 37: a ``kms claude`` session token is a lease. Renewing pushes it ahead (a lapsed one too: only its
live launcher renews, after a sleep, and its session comes back); a revoked one or another kind of token is
never renewed; the sessions whose lease lapsed are ended at the lapse (once), never those of a live lease or a
revoked token (the launcher ends those itself)."""

from __future__ import annotations

import apsw

from server.activity import tokens
from server.activity.session_registry import end_session, get_session, start_session
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


def test_a_lease_is_renewed_and_a_revoked_token_is_not(conn: apsw.Connection) -> None:
    live, revoked = (session_token(conn, sid) for sid in ("slive", "srevoked"))
    tokens.revoke(conn, revoked.id, now=T0 + 1)
    assert tokens.renew_lease(conn, live.id, 90, now=T0 + 60)
    assert tokens.get(conn, live.id).expires_at == T0 + 150
    assert not tokens.renew_lease(conn, revoked.id, 90, now=T0 + 60)
    assert tokens.get(conn, revoked.id).state(T0 + 60) == "revoked"
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


def test_a_launcher_waking_after_its_lease_lapsed_brings_its_session_back(conn: apsw.Connection) -> None:
    """The machine slept (or Ctrl-Z froze the job) past the lease: the sweep ended the session at the lapse; the
    launcher, awake, renews, and the token and the session are live again. A session its launcher ended (an
    exit code) never reopens."""
    token = session_token(conn, "ssleepy", lease=30)
    assert tokens.end_lapsed_sessions(conn, now=T0 + 60) == ["ssleepy"]
    assert tokens.get(conn, token.id).state(T0 + 60) == "expired"
    assert tokens.renew_lease(conn, token.id, 30, now=T0 + 500)
    row = get_session(conn, "ssleepy")
    assert row is not None and row.ended_at is None
    assert tokens.get(conn, token.id).state(T0 + 500) == "active"
    end_session(conn, "ssleepy", 0, now=T0 + 510)
    assert tokens.renew_lease(conn, token.id, 30, now=T0 + 600)
    ended = get_session(conn, "ssleepy")
    assert ended is not None and ended.ended_at == T0 + 510 and ended.exit_code == 0
