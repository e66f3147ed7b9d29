"""Remote mode's authorization server on loopback over plain HTTP: discovery, PKCE, redirect URIs, consent,
the token rules and the audience, against a real service (its remote listener) with a real database."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import httpx
import pytest
from support.remote import (
    CLAUDE,
    Remote,
    authorize,
    consent,
    exchange,
    pkce,
    query,
    refresh,
    register,
    remote_service,
    start_authorization,
)

from server.activity import remote_grants, tokens
from server.config.scopes import Scopes


@pytest.fixture
def remote(db_path: Path, tmp_path: Path, conn: apsw.Connection) -> Iterator[Remote]:
    with remote_service(db_path, tmp_path) as r:
        yield r


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as c:
        yield c


def mcp_post(http: httpx.Client, url: str, token: str, **headers: str) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    return http.post(
        url,
        json=body,
        headers={"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream", **headers},
    )


def test_discovery_documents_agree_and_the_401_names_them(remote: Remote, http: httpx.Client) -> None:
    unauth = http.post(remote.resource, json={})
    assert unauth.status_code == 401
    challenge = unauth.headers["www-authenticate"]
    prm_url = f"{remote.base}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{prm_url}"' in challenge
    prm = http.get(prm_url).json()
    asm = http.get(f"{remote.base}/.well-known/oauth-authorization-server").json()
    assert prm["resource"] == remote.resource and prm["authorization_servers"] == [remote.base]
    assert http.get(f"{remote.base}/.well-known/oauth-protected-resource").json() == prm
    assert asm["issuer"] == remote.base and asm["code_challenge_methods_supported"] == ["S256"]
    assert asm["authorization_response_iss_parameter_supported"] is True
    # nothing else is served: no health, no hooks
    assert http.get(f"{remote.base}/health").status_code == 404
    assert http.post(f"{remote.base}/hooks/stop", json={}).status_code == 401


def test_pkce_and_codes(remote: Remote, http: httpx.Client, conn: apsw.Connection) -> None:
    client_id = register(http, remote.base).json()["client_id"]
    _v, challenge = pkce()
    plain = start_authorization(http, remote.base, client_id, challenge, code_challenge_method="plain")
    assert query(plain.headers["location"])["error"] == "invalid_request"  # only S256
    assert query(plain.headers["location"])["iss"] == remote.base
    for challenge_given in ("", "short"):
        bad = start_authorization(http, remote.base, client_id, challenge_given)
        assert query(bad.headers["location"])["error"] == "invalid_request", challenge_given
    url = f"{remote.base}/authorize?response_type=code&client_id={client_id}&redirect_uri={CLAUDE}&state=s"
    missing = http.get(url)  # no code_challenge at all
    assert query(missing.headers["location"])["error"] == "invalid_request"
    client_id, verifier, code = authorize(http, conn, remote.base)
    wrong = exchange(http, remote.base, client_id, verifier + "x", code)
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    first = exchange(http, remote.base, client_id, verifier, code)
    assert first.status_code == 200, first.text
    access = first.json()["access_token"]
    assert mcp_post(http, remote.resource, access).status_code == 200
    replay = exchange(http, remote.base, client_id, verifier, code)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert mcp_post(http, remote.resource, access).status_code == 401  # the replay revoked what it minted
    assert [g["state"] for g in remote_grants.list_grants(conn, include_ended=True)] == ["revoked"]


def test_redirect_uris(remote: Remote, http: httpx.Client, conn: apsw.Connection) -> None:
    for refused in ("https://localhost.evil.test/cb", "https://claude.ai/api/mcp/other", "http://example.com/cb"):
        r = register(http, remote.base, refused)
        assert r.status_code == 400 and r.json()["error"] == "invalid_redirect_uri", refused
    cli = register(http, remote.base, "http://127.0.0.1:3000/callback").json()["client_id"]
    _v, challenge = pkce()
    other_port = start_authorization(http, remote.base, cli, challenge, redirect="http://127.0.0.1:4567/callback")
    assert other_port.status_code == 302 and "/consent?request=" in other_port.headers["location"]
    other_path = start_authorization(http, remote.base, cli, challenge, redirect="http://127.0.0.1:4567/other")
    assert other_path.status_code == 400
    claude = register(http, remote.base).json()["client_id"]
    exact = start_authorization(http, remote.base, claude, challenge, redirect=CLAUDE + "/x")
    assert exact.status_code == 400


def test_audience_and_listeners_keep_their_own_tokens(
    remote: Remote, http: httpx.Client, conn: apsw.Connection
) -> None:
    client_id, verifier, code = authorize(http, conn, remote.base)
    target = exchange(http, remote.base, client_id, verifier, code, resource="https://elsewhere.example/mcp")
    assert target.status_code == 400 and target.json()["error"] == "invalid_target"
    _v, challenge = pkce()
    wrong = start_authorization(http, remote.base, client_id, challenge, resource="https://elsewhere.example/mcp")
    assert query(wrong.headers["location"])["error"] == "invalid_target"
    access = exchange(http, remote.base, client_id, verifier, code).json()["access_token"]
    assert mcp_post(http, remote.resource, access).status_code == 200
    # an OAuth token on the local listener, a local token on the public one: both 401
    assert mcp_post(http, remote.state.url, access).status_code == 401
    _t, local = tokens.create(conn, label="local", scopes=Scopes.parse("tier:read"))
    assert mcp_post(http, remote.state.url, local).status_code == 200
    assert mcp_post(http, remote.resource, local).status_code == 401
    # a token issued for another resource
    conn.execute("UPDATE oauth_tokens SET resource = 'https://elsewhere.example/mcp' WHERE kind = 'access'")
    assert mcp_post(http, remote.resource, access).status_code == 401
    # a foreign Host
    assert (
        http.get(f"{remote.base}/.well-known/oauth-authorization-server", headers={"host": "evil.test"}).status_code
        == 421
    )


def test_consent_rules(remote: Remote, http: httpx.Client, conn: apsw.Connection) -> None:
    client_id = register(http, remote.base).json()["client_id"]
    _v, challenge = pkce()

    def page() -> str:
        return start_authorization(http, remote.base, client_id, challenge).headers["location"]

    foreign = start_authorization(http, remote.base, client_id, challenge, scope="offline_access tier:read admin")
    asked = http.get(foreign.headers["location"]).text
    assert 'value="read" checked' in asked and 'value="write" checked' not in asked  # unknown words dropped
    url = page()
    shown = http.get(url)
    csp = shown.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script" not in csp and "<script" not in shown.text
    assert "Test client" not in shown.text and "claude.ai" in shown.text  # the known callback's owner, its host
    no_csrf = consent(http, conn, remote.base, url, csrf="forged")
    assert no_csrf.status_code == 403
    no_code = consent(http, conn, remote.base, url, code="")
    assert no_code.status_code == 400 and "wrong or expired pairing code" in no_code.text
    denied = consent(http, conn, remote.base, url, decision="deny")
    assert denied.status_code == 303
    assert query(denied.headers["location"]) == {"error": "access_denied", "state": "st4te", "iss": remote.base}
    url = page()
    clamped = consent(http, conn, remote.base, url, tier="organize")
    got = query(clamped.headers["location"])
    assert got["iss"] == remote.base and got["state"] == "st4te"
    token = exchange(http, remote.base, client_id, _v, got["code"])
    assert token.status_code == 200 and token.json()["scope"] == "tier:write"  # organize asked, clamped
    url = page()
    for attempt in range(5):
        wrong = consent(http, conn, remote.base, url, code="0000-0000")
        assert wrong.status_code == (429 if attempt == 4 else 400)
    locked = consent(http, conn, remote.base, url)  # the right code, but pairing is locked
    assert locked.status_code == 429 and "locked" in locked.text


def test_clamped_scopes_refresh_rotation_reuse_and_revocation(
    remote: Remote, http: httpx.Client, conn: apsw.Connection
) -> None:
    client_id, verifier, code = authorize(http, conn, remote.base, tier="organize")
    first = exchange(http, remote.base, client_id, verifier, code).json()
    assert first["scope"] == "tier:write"  # remote.max_scopes
    second = refresh(http, remote.base, client_id, first["refresh_token"])
    assert second.status_code == 200 and second.json()["refresh_token"] != first["refresh_token"]
    new_access = second.json()["access_token"]
    assert mcp_post(http, remote.resource, new_access).status_code == 200
    reused = refresh(http, remote.base, client_id, first["refresh_token"])
    assert reused.status_code == 400
    assert mcp_post(http, remote.resource, new_access).status_code == 401  # the whole grant ended
    # a grant ends 90 days after consent whatever its refreshes
    client_id, verifier, code = authorize(http, conn, remote.base)
    pair = exchange(http, remote.base, client_id, verifier, code).json()
    grant = remote_grants.list_grants(conn)[0]
    conn.execute("UPDATE tokens SET expires_at = ? WHERE id = ?", (time.time() - 1, grant["tokenId"]))
    assert mcp_post(http, remote.resource, pair["access_token"]).status_code == 401
    assert refresh(http, remote.base, client_id, pair["refresh_token"]).status_code == 400
    # kms token revoke ends a grant at its next request
    client_id, verifier, code = authorize(http, conn, remote.base)
    pair = exchange(http, remote.base, client_id, verifier, code).json()
    assert mcp_post(http, remote.resource, pair["access_token"]).status_code == 200
    grant = remote_grants.list_grants(conn)[0]
    assert grant["client"] == "claude.ai" and grant["scopes"] == "tier:write"
    remote_grants.revoke_grant(conn, grant["id"])
    assert mcp_post(http, remote.resource, pair["access_token"]).status_code == 401
    # RFC 7009 revocation by the client
    client_id, verifier, code = authorize(http, conn, remote.base)
    pair = exchange(http, remote.base, client_id, verifier, code).json()
    gone = http.post(
        f"{remote.base}/revoke", data={"token": pair["refresh_token"], "client_id": client_id, "client_secret": ""}
    )
    assert gone.status_code == 200
    assert mcp_post(http, remote.resource, pair["access_token"]).status_code == 401


def test_a_confidential_clients_secret_is_kept_as_a_hash(
    remote: Remote, http: httpx.Client, conn: apsw.Connection
) -> None:
    made = register(http, remote.base, token_endpoint_auth_method="client_secret_post").json()
    client_id, secret = made["client_id"], made["client_secret"]
    assert secret and secret not in str(conn.execute("SELECT info FROM oauth_clients").fetchall())
    verifier, challenge = pkce()
    started = start_authorization(http, remote.base, client_id, challenge)
    code = query(consent(http, conn, remote.base, started.headers["location"]).headers["location"])["code"]
    assert exchange(http, remote.base, client_id, verifier, code).status_code == 401  # no secret
    assert exchange(http, remote.base, client_id, verifier, code, client_secret="wrong").status_code == 401
    good = exchange(http, remote.base, client_id, verifier, code, client_secret=secret)
    assert good.status_code == 200, good.text
    basic = httpx.BasicAuth(client_id, secret)
    again = http.post(
        f"{remote.base}/token",
        data={"grant_type": "refresh_token", "refresh_token": good.json()["refresh_token"], "client_id": client_id},
        auth=basic,
    )
    assert again.status_code == 200, again.text
