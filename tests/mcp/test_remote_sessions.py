"""A remote grant is a session: tools by its scopes, 403 ``insufficient_scope`` above them, hidden notes never
reach it, its identity in provenance, and every write it makes waits for the person before it lands."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import apsw
import httpx
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from support.remote import Remote, authorize, exchange, remote_service
from support.vaults import write

from server.activity import approvals, remote_grants
from server.index.indexer import index_vault
from server.mcp.tools import REGISTRY
from server.vault.registry import add_vault

HIDE = '\n[privacy]\nhide_folders = ["private"]\n'


@pytest.fixture
def remote(db_path: Path, tmp_path: Path, conn: apsw.Connection) -> Iterator[Remote]:
    vault = tmp_path / "vault"
    write(vault / "Lighthouse.md", "# Lighthouse\n\nThe keeper's lighthouse log.\n")
    write(vault / "private" / "Secret.md", "# Secret\n\nzqxsecret lighthouse plans.\n")
    with remote_service(db_path, tmp_path, HIDE) as r:
        index_vault(conn, add_vault(conn, vault, "notes"))
        yield r


def grant(conn: apsw.Connection, remote: Remote, tier: str) -> str:
    with httpx.Client(timeout=10) as http:
        client_id, verifier, code = authorize(http, conn, remote.base, tier=tier)
        answer = exchange(http, remote.base, client_id, verifier, code)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["access_token"])


@contextlib.asynccontextmanager
async def session(remote: Remote, access: str, mode: str = "legacy") -> AsyncIterator[Any]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {access}"})
    async with http, Client(streamable_http_client(remote.resource, http_client=http), mode=mode) as c:
        yield c


def approve(conn: apsw.Connection, pending_id: int) -> None:
    """The person approves, as ``kms approve`` does: through the one decision function once the staging work
    is in (``server.writes.review.decide_pending``, which applies a detached item), else the waiting call's
    decision row (the call, still waiting, applies it)."""
    if importlib.util.find_spec("server.writes.review") is not None:
        review: Any = importlib.import_module("server.writes.review")
        review.decide_pending(conn, pending_id, True, channel="cli")
    else:
        approvals.decide(conn, pending_id, approve=True)


def names(ceiling: str) -> set[str]:
    order = ("read", "write", "edit", "organize")
    return {s.name for s in REGISTRY if order.index(s.tier) <= order.index(ceiling)}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tools_by_scope_and_insufficient_scope(remote: Remote, conn: apsw.Connection, mode: str) -> None:
    reader = grant(conn, remote, "read")
    async with session(remote, reader, mode) as c:
        assert {t.name for t in (await c.list_tools()).tools} == names("read")
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "kms_create", "arguments": {}}}
    refused = httpx.post(
        remote.resource,
        json=call,
        headers={"authorization": f"Bearer {reader}", "accept": "application/json, text/event-stream"},
    )
    assert refused.status_code == 403
    challenge = refused.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="tier:write"' in challenge


async def test_hidden_notes_never_reach_a_grant(remote: Remote, conn: apsw.Connection) -> None:
    reader = grant(conn, remote, "read")
    secret = conn.execute("SELECT id FROM notes WHERE path = 'private/Secret.md'").fetchall()
    async with session(remote, reader) as c:
        found = await c.call_tool("kms_search", {"query": "lighthouse"})
        text = str(found.structured_content)
        assert "Lighthouse" in text and "zqxsecret" not in text and "Secret" not in text
        for name in [row[0] for row in secret] + ["private/Secret.md", "notes:private/Secret.md", "Secret"]:
            read = await c.call_tool("kms_read", {"noteId": name})
            assert read.is_error and "zqxsecret" not in str(read.structured_content), name
        with pytest.raises(Exception) as refused:  # noqa: PT011 - the SDK raises the server's JSON-RPC error
            await c.read_resource("kms://notes/private/Secret.md")
        assert "zqxsecret" not in str(refused.value)
        listed = await c.list_resources()
        assert all("Secret" not in str(r.uri) and "Secret" not in (r.name or "") for r in listed.resources)


async def test_a_remote_write_waits_for_the_person_and_names_the_grant(remote: Remote, conn: apsw.Connection) -> None:
    writer = grant(conn, remote, "write")
    made: list[Any] = []
    async with session(remote, writer) as c, anyio.create_task_group() as tg:

        async def create() -> None:
            made.append(await c.call_tool("kms_create", {"title": "From the phone", "content": "Ideas."}))

        tg.start_soon(create)
        deadline = time.monotonic() + 15
        while not approvals.list_pending(conn) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        waiting = approvals.list_pending(conn)
        assert [p.tool for p in waiting] == ["kms_create"], made
        assert not (remote_vault := Path(remote.state.db_path).parent / "vault" / "From the phone.md").exists()
        approve(conn, waiting[0].id)
    grant_row = remote_grants.list_grants(conn)[0]
    assert waiting[0].session_id == grant_row["sessionId"]
    deadline = time.monotonic() + 15
    while not remote_vault.exists() and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    assert remote_vault.exists()
    who = conn.execute("SELECT session_id FROM tool_invocations WHERE tool = 'kms_create' AND error IS NULL").fetchall()
    assert who == [(grant_row["sessionId"],)]
    project = conn.execute("SELECT project FROM sessions WHERE id = ?", (grant_row["sessionId"],)).fetchall()
    assert project == [("claude.ai via remote",)]


async def test_a_remote_grant_s_staged_answer_names_the_page_on_the_public_origin(
    remote: Remote, conn: apsw.Connection
) -> None:
    """The person of a remote grant is on a paired device: the answer names the public origin's page, never this
    machine's loopback service."""
    writer = grant(conn, remote, "write")
    async with session(remote, writer) as c:
        staged = await c.call_tool("kms_create", {"title": "Where to look", "content": "Ideas."})
    answer: dict[str, Any] = staged.structured_content or {}
    assert answer["status"] == "staged", answer
    assert answer["reviewUrl"] == f"{remote.base}/review/pending/{answer['pendingId']}"
    assert remote.state.pages_url not in answer["review"] and answer["reviewUrl"] in answer["review"]
