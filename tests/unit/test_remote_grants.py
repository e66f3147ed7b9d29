"""The remote grants' store and the pairing codes on a real database: lifetimes (a refresh never outlives its
grant), sweeping unused registrations, the pairing lock's end, and the scope clamp."""

from __future__ import annotations

import apsw
import pytest
from support.remote import GRANT_PARAMS

from server.activity import remote_grants, remote_pairing
from server.config.scopes import Scopes
from server.errors import KmsError


def test_tokens_never_outlive_the_grant(conn: apsw.Connection) -> None:
    t0 = 1_000_000.0
    remote_grants.save_client(conn, "c1", {"client_id": "c1"}, now=t0)
    code = remote_grants.issue_code(conn, "c1", GRANT_PARAMS, now=t0)
    issued = remote_grants.exchange_code(conn, code, now=t0)
    assert issued.expires_in == 3600
    second = remote_grants.rotate_refresh(conn, issued.refresh_token, "tier:write", now=t0 + 7200)
    kept = conn.execute("SELECT kind, rotated_at IS NOT NULL FROM oauth_tokens ORDER BY created_at, kind").fetchall()
    assert kept == [("refresh", 1), ("access", 0), ("refresh", 0)]  # the first hour's access token forgotten
    late = t0 + remote_grants.GRANT_S - 600  # ten minutes before the grant's end: refresh
    again = remote_grants.rotate_refresh(conn, second.refresh_token, "tier:write", now=late)
    assert again.expires_in == 600
    ends = conn.execute("SELECT max(expires_at) FROM oauth_tokens").fetchall()[0][0]
    assert ends == t0 + remote_grants.GRANT_S
    assert remote_grants.check_access(conn, again.access_token, now=t0 + remote_grants.GRANT_S + 1) is None


def test_unused_registrations_are_swept(conn: apsw.Connection) -> None:
    t0 = 2_000_000.0
    remote_grants.save_client(conn, "unused", {"client_id": "unused"}, now=t0)
    remote_grants.save_client(conn, "granted", {"client_id": "granted"}, now=t0)
    remote_grants.exchange_code(conn, remote_grants.issue_code(conn, "granted", GRANT_PARAMS, now=t0), now=t0)
    remote_grants.sweep_clients(conn, now=t0 + remote_grants.UNUSED_CLIENT_S + 1)
    assert remote_grants.load_client(conn, "unused") is None
    assert remote_grants.load_client(conn, "granted") is not None


def test_pairing_lock_ends(conn: apsw.Connection) -> None:
    t0 = 3_000_000.0
    code, _until = remote_pairing.new_code(conn, now=t0)
    for _ in range(remote_pairing.MAX_FAILURES):
        with pytest.raises(KmsError):
            remote_pairing.use_code(conn, "1111-1111" if code != "1111-1111" else "2222-2222", now=t0)
    with pytest.raises(KmsError) as locked:
        remote_pairing.use_code(conn, code, now=t0 + 1)
    assert locked.value.kind == "rate-limited"
    later = t0 + remote_pairing.LOCK_S + 1
    fresh, _until = remote_pairing.new_code(conn, now=later)
    remote_pairing.use_code(conn, fresh, now=later)  # the lock has ended
    with pytest.raises(KmsError):
        remote_pairing.use_code(conn, fresh, now=later + 1)  # once only


def test_expired_pairing_code_is_refused(conn: apsw.Connection) -> None:
    code, until = remote_pairing.new_code(conn, now=100.0)
    with pytest.raises(KmsError) as late:
        remote_pairing.use_code(conn, code, now=until + 1)
    assert late.value.kind == "invalid-input"


def test_scopes_are_clamped_to_the_ceiling() -> None:
    ceiling = Scopes.parse("tier:write vault:notes folder:inbox")
    asked = Scopes.parse("tier:organize vault:notes vault:work folder:inbox/phone folder:elsewhere admin")
    assert asked.within(ceiling).text() == "tier:write vault:notes folder:inbox/phone"
    assert Scopes.parse("tier:read").within(ceiling).text() == "tier:read vault:notes folder:inbox"
