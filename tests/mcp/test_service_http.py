"""The kms service over Streamable HTTP: a real service (uvicorn on a loopback port) spoken to by the SDK's
real HTTP client in both protocol eras, with real tokens in the database.

A token's scopes decide what its session sees and may do; every request is checked again (revoked and
expired tokens fail at once; a paused session answers ``paused``); the transport refuses what it must
(no or wrong token 401, foreign Host 421, foreign Origin 403, an oversized body 413) and keeps serving.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import apsw
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from support.sql import value
from support.vaults import write

from server.activity import control, tokens
from server.config.scopes import Scopes
from server.index.indexer import index_vault
from server.mcp import service
from server.mcp.tools import REGISTRY
from server.vault.registry import add_vault

MODES = ("legacy", "auto")


@pytest.fixture
def two_vaults(conn: apsw.Connection, tmp_path: Path) -> apsw.Connection:
    a, b = tmp_path / "vault-a", tmp_path / "vault-b"
    write(a / "Alpha.md", "# Alpha\n\nThe lighthouse keeper's log.\n")
    write(b / "Beta.md", "# Beta\n\nAnother lighthouse.\n")
    for root, name in ((a, "a"), (b, "b")):
        index_vault(conn, add_vault(conn, root, name))
    return conn


@pytest.fixture
def running(two_vaults: apsw.Connection, db_path: Path, tmp_path: Path) -> Iterator[service.ServiceState]:
    """The service in a thread of this process, on a free loopback port; stopped after the test."""
    (tmp_path / "config.toml").write_text("[agent]\nwrite = true\nedit = true\norganize = true\n")
    ready: list[service.ServiceState] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=service.run,
        args=(db_path,),
        kwargs={"port": 0, "host": "127.0.0.1", "on_ready": ready.append, "stop": stop},
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + 20
    while not ready and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ready, "the service did not start"
    try:
        yield ready[0]
    finally:
        stop.set()
        thread.join(20)
        assert not thread.is_alive()


def token(conn: apsw.Connection, scopes: str, **kw: Any) -> tuple[tokens.Token, str]:
    return tokens.create(conn, label=f"test {scopes}", scopes=Scopes.parse(scopes), **kw)


@contextlib.asynccontextmanager
async def client(state: service.ServiceState, secret: str, mode: str = "auto") -> AsyncIterator[Any]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
    async with http, Client(streamable_http_client(state.url, http_client=http), mode=mode) as c:
        yield c


async def call(c: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await c.call_tool(name, args)
    return {**result.structured_content, "_error": bool(result.is_error)}


def names(tier_ceiling: str) -> set[str]:
    order = ("read", "write", "edit", "organize")
    return {s.name for s in REGISTRY if order.index(s.tier) <= order.index(tier_ceiling)}


@pytest.mark.parametrize("mode", MODES)
async def test_a_token_sees_only_its_tools_and_vault(
    running: service.ServiceState, two_vaults: apsw.Connection, mode: str
) -> None:
    reader, reader_secret = token(two_vaults, "tier:read vault:a")
    editor, editor_secret = token(two_vaults, "tier:edit folder:drafts")
    async with client(running, reader_secret, mode) as r, client(running, editor_secret, mode) as e:
        assert {t.name for t in (await r.list_tools()).tools} == names("read")
        assert {t.name for t in (await e.list_tools()).tools} == names("edit")
        assert {h["vault"] for h in (await call(r, "kms_search", {"query": "lighthouse"}))["hits"]} == {"a"}
        assert {h["vault"] for h in (await call(e, "kms_search", {"query": "lighthouse"}))["hits"]} == {"a", "b"}
        beta = two_vaults.execute("SELECT id FROM notes WHERE title = 'Beta'").fetchall()[0][0]
        assert (await call(r, "kms_read", {"noteId": beta}))["error"] == "not-found"
        assert (await call(r, "kms_create", {"title": "x", "vault": "a"}))["error"] == "feature-disabled"
        assert (await call(e, "kms_create", {"title": "Out", "vault": "a"}))["error"] == "folder-denied"
        made = await call(e, "kms_create", {"title": "In", "vault": "a", "folder": "drafts"})
        assert not made["_error"], made
        assert (await call(e, "kms_trash", {"noteId": made["noteId"]}))["error"] == "feature-disabled"
    rows = two_vaults.execute(
        "SELECT session_id, tool, coalesce(error, '') FROM tool_invocations ORDER BY id"
    ).fetchall()
    assert rows == [
        (reader.session_id, "kms_create", "feature-disabled"),
        (editor.session_id, "kms_create", "folder-denied"),
        (editor.session_id, "kms_create", ""),
        (editor.session_id, "kms_trash", "feature-disabled"),
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_revoked_expired_and_paused(
    running: service.ServiceState, two_vaults: apsw.Connection, mode: str
) -> None:
    writer, secret = token(two_vaults, "tier:write")
    async with client(running, secret, mode) as w:
        assert not (await call(w, "kms_create", {"title": "One", "vault": "a"}))["_error"]
        control.set_state(two_vaults, writer.session_id, "paused", reason="checking")
        assert (await call(w, "kms_create", {"title": "Two", "vault": "a"}))["error"] == "paused"
        tokens.revoke(two_vaults, writer.id)
        with pytest.raises(Exception):  # noqa: B017 - the SDK raises its own error for a 401
            await w.list_tools()
    with anyio.fail_after(15):  # the service ends the session of a revoked token (the dashboard shows it)
        while not two_vaults.execute(
            "SELECT ended_at IS NOT NULL FROM sessions WHERE id = ?", (writer.session_id,)
        ).fetchall()[0][0]:
            await anyio.sleep(0.1)
    _old, expired = token(two_vaults, "tier:read", expires_in_s=10, now=time.time() - 60)
    assert _status(running, expired) == 401


def _status(state: service.ServiceState, secret: str | None, **headers: str) -> int:
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if secret is not None:
        base["Authorization"] = f"Bearer {secret}"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    return httpx2.post(state.url, json=body, headers={**base, **headers}, timeout=10).status_code


def test_the_transport_refuses_what_it_must_and_keeps_serving(
    running: service.ServiceState, two_vaults: apsw.Connection
) -> None:
    _t, secret = token(two_vaults, "tier:read")
    _a, admin = tokens.create(two_vaults, label="me", scopes=Scopes.parse("admin"), kind="admin")
    assert _status(running, None) == 401
    assert _status(running, "kms_tnotatoken_secret") == 401
    assert _status(running, secret[:-2] + "xx") == 401
    assert _status(running, admin) == 401  # an admin token never reaches the tools
    assert _status(running, secret, Host="evil.example") == 421
    assert _status(running, secret, Origin="http://evil.example") == 403
    big = httpx2.post(
        running.url,
        content=b"{" + b" " * (17 * 1024 * 1024) + b"}",
        timeout=30,
        headers={
            "Authorization": f"Bearer {secret}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert big.status_code == 413
    assert _status(running, secret) == 200  # still serving
    health = httpx2.get(running.url.removesuffix("/mcp") + "/health", timeout=10).json()
    assert health["kms"] is True and "token" not in str(health)
    state_file = service.state_path(Path(running.db_path))
    assert state_file.stat().st_mode & 0o777 == 0o600 and state_file.parent.stat().st_mode & 0o777 == 0o700


def test_protocol_abuse_over_http_gets_typed_answers_and_the_service_keeps_serving(
    running: service.ServiceState, two_vaults: apsw.Connection
) -> None:
    """The inputs the stdio screen refuses (depth, ids, surrogates, invalid UTF-8, huge integers, not an object)
    are refused over HTTP too, each with a JSON-RPC error; unauthenticated ones get 401 first."""
    _t, secret = token(two_vaults, "tier:read")
    headers = {
        "Authorization": f"Bearer {secret}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    bodies = [
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b"[" * 200 + b"]" * 200 + b"}",
        b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1000000000000000000000000000000,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"kms_search","arguments":{"query":"\xed"}}}',
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]',
        b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":[1,2]}',
        b"not json at all",
    ]
    for body in bodies:
        reply = httpx2.post(running.url, content=body, headers=headers, timeout=10)
        assert reply.status_code == 400, (body[:80], reply.status_code, reply.text[:200])
        error = reply.json()["error"]
        assert error["code"] in (-32700, -32600, -32602) and error["message"], error
        assert (
            httpx2.post(
                running.url, content=body, headers={**headers, "Authorization": "Bearer x"}, timeout=10
            ).status_code
            == 401
        )
    assert _status(running, secret) == 200  # 0 crashes: still serving


async def test_a_broken_session_does_not_take_the_service_down(
    running: service.ServiceState, two_vaults: apsw.Connection
) -> None:
    """A token whose vault is gone, then a vault folder that vanished under a session: typed answers for that
    session, the others served as before."""
    _g, gone = token(two_vaults, "tier:read vault:nosuch")
    _r, fine = token(two_vaults, "tier:write")
    async with client(running, gone) as g, client(running, fine) as f:
        answer = await call(g, "kms_search", {"query": "lighthouse"})
        assert answer["_error"] and answer["error"] == "not-found", answer
        assert (await call(f, "kms_search", {"query": "lighthouse"}))["hits"]
        root = value(two_vaults, "SELECT root FROM vaults WHERE name = 'b'")
        Path(root).rename(Path(root + "-moved"))
        beta = two_vaults.execute("SELECT id FROM notes WHERE title = 'Beta'").fetchall()[0][0]
        answer = await call(f, "kms_append", {"noteId": beta, "content": "lost?"})
        assert answer["_error"] and answer["error"] == "not-found", answer  # the file is gone: typed, no crash
        assert (await call(f, "kms_search", {"query": "keeper"}))["hits"]
    assert _status(running, fine) == 200


async def test_a_token_folder_scope_covers_frontmatter_writes(
    running: service.ServiceState, two_vaults: apsw.Connection
) -> None:
    """A ``tier:write folder:drafts`` token cannot change a root note's properties or links, nor remember in
    the memory folder (every write follows the allowlist and the token's folders); inside drafts it can."""
    alpha = Path(value(two_vaults, "SELECT root FROM vaults WHERE name = 'a'")) / "Alpha.md"
    before = alpha.read_bytes()
    _w, writer = token(two_vaults, "tier:write folder:drafts")
    async with client(running, writer) as w:
        props = await call(w, "kms_update_properties", {"noteId": "a:Alpha.md", "set": {"private": True}})
        link = await call(w, "kms_link", {"noteId": "a:Alpha.md", "target": "Beta"})
        made = await call(w, "kms_create", {"title": "Draft", "vault": "a", "folder": "drafts"})
        inside = await call(w, "kms_update_properties", {"noteId": made["noteId"], "set": {"s": "x"}})
        remember = await call(w, "kms_remember", {"about": "person", "text": "likes short answers"})
    for refused in (props, link, remember):
        assert refused["error"] == "folder-denied" and "the token's folder: scopes" in refused["message"], refused
    assert not inside["_error"], inside
    assert alpha.read_bytes() == before


def _post_hook(state: service.ServiceState, secret: str, event: str, **headers: str) -> httpx2.Response:
    base = state.url.removesuffix("/mcp")
    auth = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    event_body = {"session_id": "x", "reason": "other"}
    return httpx2.post(f"{base}/hooks/{event}", json=event_body, headers={**auth, **headers}, timeout=10)


def test_hooks_take_only_a_session_token_and_every_route_screens_host_and_origin(
    running: service.ServiceState, two_vaults: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """A host token of any tier (tier:read here) is refused at /hooks (403): the session-end hook would have
    kms write a session note into the vault. /hooks and /health refuse a foreign Host (421) or Origin (403)
    as /mcp does, and /health says only kms, version and pid."""
    from server.config.session_contract import SessionConfig

    _r, reader = token(two_vaults, "tier:read")
    _w, writer = token(two_vaults, "tier:organize")
    for secret in (reader, writer):
        for event in ("session-end", "stop", "pre-compact"):
            answer = _post_hook(running, secret, event)
            assert answer.status_code == 403 and answer.json()["error"] == "forbidden", (event, answer.text)
    assert not list(tmp_path.rglob("kms-sessions")), "a host token made kms write a session note"
    assert value(two_vaults, "SELECT count(*) FROM tool_invocations WHERE tool = 'session-note'") == 0
    config = SessionConfig.from_env({"KMS_DB_PATH": str(db_path)}, vault="a", watch=False)
    _s, session = tokens.for_session(two_vaults, config)
    assert _post_hook(running, session, "stop").status_code == 200  # kms claude's own session
    assert _post_hook(running, session, "stop", Host="evil.example").status_code == 421
    assert _post_hook(running, session, "stop", Origin="http://evil.example").status_code == 403
    health = running.url.removesuffix("/mcp") + "/health"
    assert httpx2.get(health, headers={"Host": "evil.example"}, timeout=10).status_code == 421
    assert httpx2.get(health, headers={"Origin": "http://evil.example"}, timeout=10).status_code == 403
    assert set(httpx2.get(health, timeout=10).json()) == {"kms", "version", "pid"}


async def test_a_tier_refusal_names_the_token_scope_not_settings_that_are_on(
    running: service.ServiceState, two_vaults: apsw.Connection
) -> None:
    """The settings turn write, edit and organize on; a ``tier:read`` / ``tier:write`` token's refusal names its
    scope and the token that would allow the call, never a ``kms config set`` that would change nothing."""
    _r, reader = token(two_vaults, "tier:read")
    _w, writer = token(two_vaults, "tier:write")
    async with client(running, reader) as r, client(running, writer) as w:
        create = await call(r, "kms_create", {"title": "x", "vault": "a"})
        edit = await call(w, "kms_edit", {"noteId": "a:Alpha.md", "version": "x", "edits": []})
    assert create["error"] == edit["error"] == "feature-disabled"
    assert "tier:read" in create["message"] and "--scopes tier:write" in create["message"], create
    assert "tier:write" in edit["message"] and "--scopes tier:edit" in edit["message"], edit
    for refused in (create, edit):
        assert "kms config set" not in refused["message"] and "is off" not in refused["message"], refused


def test_each_request_on_a_kept_alive_connection_is_checked_as_its_own_token(
    running: service.ServiceState, two_vaults: apsw.Connection
) -> None:
    """The token is read once per request (``OncePerRequest``: the guard's check serves the SDK's), and never
    for the next request: on one kept-alive connection, a revoked token is refused at once, and a read token
    after a write token sees only the read tools."""
    writer, write_secret = token(two_vaults, "tier:write")
    _reader, read_secret = token(two_vaults, "tier:read")

    def tool_names(http: httpx2.Client, secret: str) -> tuple[int, set[str]]:
        reply = http.post(
            running.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}},
            headers={
                "Authorization": f"Bearer {secret}",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/list",
            },
        )
        if reply.status_code != 200:
            return reply.status_code, set()
        return 200, {t["name"] for t in reply.json()["result"]["tools"]}

    with httpx2.Client(timeout=10) as http:
        status, seen = tool_names(http, write_secret)
        assert status == 200 and "kms_create" in seen
        status, seen = tool_names(http, read_secret)
        assert status == 200 and seen and "kms_create" not in seen
        tokens.revoke(two_vaults, writer.id)
        assert tool_names(http, write_secret)[0] == 401
        assert tool_names(http, read_secret)[0] == 200


META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
