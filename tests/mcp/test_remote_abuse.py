"""Remote mode against abuse: foreign Host and Origin, oversized bodies, registration floods, client ids that are
URLs (the known ones pinned, unknown ones refused unless fetching is allowed, and then only public https)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import httpx
import pytest
from support.remote import Remote, consent, exchange, pkce, query, register, remote_service, start_authorization

from server.activity import remote_grants
from server.mcp.remote.clients import fetch_document, public_address


@pytest.fixture
def remote(db_path: Path, tmp_path: Path, conn: apsw.Connection) -> Iterator[Remote]:
    with remote_service(db_path, tmp_path) as r:
        yield r


def test_host_origin_and_body_limits(remote: Remote) -> None:
    with httpx.Client(timeout=10) as http:
        metadata = f"{remote.base}/.well-known/oauth-authorization-server"
        assert http.get(metadata, headers={"host": "evil.test"}).status_code == 421
        assert http.get(metadata, headers={"host": "localhost:" + remote.base.rsplit(":", 1)[1]}).status_code == 421
        assert http.get(metadata, headers={"origin": "https://evil.test"}).status_code == 403
        assert http.get(metadata, headers={"origin": "https://claude.ai"}).status_code == 200
        big = http.post(f"{remote.base}/register", content=b"{" + b" " * (70 * 1024) + b"}")
        assert big.status_code == 413
        huge = http.post(remote.resource, content=b"x" * (17 * 1024 * 1024), headers={"authorization": "Bearer x"})
        assert huge.status_code == 401  # no token: refused before the body is read


def test_registration_is_rate_limited(remote: Remote, conn: apsw.Connection) -> None:
    with httpx.Client(timeout=10) as http:
        codes = [register(http, remote.base).status_code for _ in range(remote_grants.REGISTRATIONS_PER_HOUR + 1)]
    assert codes[:-1] == [201] * remote_grants.REGISTRATIONS_PER_HOUR
    assert codes[-1] == 429


def test_known_client_ids_are_pinned_and_unknown_urls_refused(remote: Remote, conn: apsw.Connection) -> None:
    verifier, challenge = pkce()
    with httpx.Client(timeout=10) as http:
        pinned = "https://claude.ai/oauth/mcp-oauth-client-metadata"
        started = start_authorization(http, remote.base, pinned, challenge)
        assert started.status_code == 302 and "/consent?request=" in started.headers["location"]
        done = consent(http, conn, remote.base, started.headers["location"])
        got = query(done.headers["location"])
        token = exchange(http, remote.base, pinned, verifier, got["code"])
        assert token.status_code == 200, token.text
        # a pinned client with a redirect it does not list
        elsewhere = start_authorization(http, remote.base, pinned, challenge, redirect="https://evil.test/cb")
        assert elsewhere.status_code == 400
        unknown = start_authorization(http, remote.base, "https://evil.test/client.json", challenge)
        assert unknown.status_code == 400 and "not found" in unknown.text
    grant = remote_grants.list_grants(conn)[0]
    assert (grant["client"], grant["clientId"]) == ("claude.ai", "https://claude.ai/oauth/mcp-oauth-client-metadata")


def test_metadata_fetch_guards() -> None:
    assert not public_address("127.0.0.1")
    assert not public_address("10.0.0.8")
    assert not public_address("169.254.169.254")
    assert not public_address("localhost")
    for refused in (
        "http://example.com/client.json",  # not https
        "https://127.0.0.1/client.json",  # loopback
        "https://10.1.2.3/client.json",  # private
        "https://example.com:8443/client.json",  # another port
        "https://user@example.com/client.json",  # userinfo
    ):
        assert fetch_document(refused) is None, refused


def test_waiting_authorizations_are_bounded_and_forged_forms_refused(remote: Remote, conn: apsw.Connection) -> None:
    _v, challenge = pkce()
    with httpx.Client(timeout=10) as http:
        client_id = register(http, remote.base).json()["client_id"]
        first = start_authorization(http, remote.base, client_id, challenge).headers["location"]
        forged = consent(http, conn, remote.base, first, csrf="\u00e9t\u00e9")
        assert forged.status_code == 403
        for _ in range(remote_grants.MAX_WAITING_REQUESTS - 1):
            assert start_authorization(http, remote.base, client_id, challenge).status_code == 302
        full = start_authorization(http, remote.base, client_id, challenge)
        assert query(full.headers["location"])["error"] == "temporarily_unavailable"
