"""End to end with the SDK's own OAuth client (``mcp.client.auth.OAuthClientProvider``) against the service's
remote listener on loopback, in both protocol eras: discovery from the 401, dynamic registration, authorization
with the person typing the pairing code on the consent page, tools/call, a refresh, and revocation."""

from __future__ import annotations

import time
from pathlib import Path

import apsw
import httpx
import pytest
from mcp.client import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl
from support.remote import consent, query, remote_service
from support.vaults import write

from server.activity import remote_grants
from server.index.indexer import index_vault
from server.vault.registry import add_vault

CALLBACK = "http://127.0.0.1:8999/callback"


class Storage:
    """Where a client keeps its tokens and registration (memory)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Person:
    """The browser and the person at it: follows /authorize to the consent page, types the pairing code."""

    def __init__(self, conn: apsw.Connection, base: str) -> None:
        self.conn, self.base = conn, base
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, url: str) -> None:
        with httpx.Client(timeout=10) as http:
            started = http.get(url)
            assert started.status_code == 302, started.text
            done = consent(http, self.conn, self.base, started.headers["location"])
            assert done.status_code == 303, done.text
            got = query(done.headers["location"])
        self.result = AuthorizationCodeResult(code=got["code"], state=got.get("state"), iss=got.get("iss"))

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_client_connects_calls_refreshes_and_is_revoked(
    db_path: Path, tmp_path: Path, conn: apsw.Connection, mode: str
) -> None:
    vault = tmp_path / "vault"
    write(vault / "Lighthouse.md", "# Lighthouse\n\nThe keeper's log.\n")
    index_vault(conn, add_vault(conn, vault, "notes"))
    with remote_service(db_path, tmp_path) as remote:
        person = Person(conn, remote.base)
        storage = Storage()
        oauth = OAuthClientProvider(
            remote.resource,
            OAuthClientMetadata(
                redirect_uris=[AnyUrl(CALLBACK)], client_name="sdk test", token_endpoint_auth_method="none"
            ),
            storage,
            redirect_handler=person.redirect,
            callback_handler=person.callback,
        )
        http = create_mcp_http_client(auth=oauth)
        async with http, Client(streamable_http_client(remote.resource, http_client=http), mode=mode) as c:
            tools = {t.name for t in (await c.list_tools()).tools}
            assert "kms_search" in tools and "kms_create" in tools and "kms_move" not in tools  # tier:write
            found = await c.call_tool("kms_search", {"query": "lighthouse"})
            assert not found.is_error and found.structured_content["hits"], found
            first = storage.tokens
            assert first is not None and first.refresh_token
            oauth.context.token_expiry_time = time.time() - 1  # an hour later: the client refreshes
            again = await c.call_tool("kms_search", {"query": "keeper"})
            assert not again.is_error
            assert storage.tokens is not None and storage.tokens.refresh_token != first.refresh_token
            grants = remote_grants.list_grants(conn)
            assert [(g["client"], g["scopes"]) for g in grants] == [("sdk test", "tier:write")]
            remote_grants.revoke_grant(conn, grants[0]["id"])
            answer = httpx.post(
                remote.resource,
                json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                headers={"authorization": f"Bearer {storage.tokens.access_token}"},
            )
            assert answer.status_code == 401  # revoked: its next request is refused
            assert "resource_metadata=" in answer.headers["www-authenticate"]  # the client would start over
        ran = conn.execute("SELECT DISTINCT session_id FROM note_reads").fetchall()
        assert ran in ([], [(grants[0]["sessionId"],)])
