"""A detached session over the service's Streamable HTTP (issue 39's remote grants stand on it): a token's session
opened detached in the service's hub, a real SDK client over HTTP in both protocol eras; its write is answered
``staged`` at once, the review page's channel (``web``) approves it in the service's own process, and the
agent's ``kms_pending`` over HTTP tells it the call landed."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from support.vaults import note_id

from server.activity import tokens
from server.config.scopes import Scopes
from server.config.session_contract import SessionConfig
from server.mcp.http import service_app
from server.mcp.hub import SessionHub
from server.mcp.process import ProcessServices
from server.mcp.service import loopback_sockets
from server.writes.review import decide_pending

ERAS = {"legacy": "2025-11-25", "auto": "2026-07-28"}


def _config(db_path: Path, session_id: str, **fields: Any) -> SessionConfig:
    env = {"KMS_DB_PATH": str(db_path), "KMS_CONFIG": os.environ["KMS_CONFIG"]}
    return SessionConfig.from_env(env, watch=False, session_id=session_id, **fields)


@pytest.fixture
def hub_served(indexed: apsw.Connection, db_path: Path) -> Iterator[tuple[SessionHub, str]]:
    """The service's app over a hub of this test, on a free loopback port, under uvicorn in a thread; stopped
    after the test."""
    import uvicorn

    base = _config(db_path, "service")
    hub = SessionHub(ProcessServices.for_config(base), settings=lambda sid: _config(db_path, sid))
    sockets = loopback_sockets(0, "127.0.0.1")
    host, port = sockets[0].getsockname()[:2]
    server = uvicorn.Server(uvicorn.Config(service_app(hub, host=host, port=port), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    assert server.started, "the service's app did not start"
    try:
        yield hub, f"http://{host}:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(15)
        for sock in sockets:
            sock.close()
        hub.close_all()


@pytest.mark.parametrize("mode", ERAS)
async def test_a_detached_token_session_over_http_is_staged_then_applied_by_the_web_decision(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, hub_served: tuple[SessionHub, str], mode: str
) -> None:
    import server.mcp.tools  # noqa: F401 - the write tools a decision applies with (the service has them)

    hub, url = hub_served
    token, secret = tokens.create(indexed, label="remote-like", scopes=Scopes.parse("tier:write approval"))
    narrowed = token.scopes.narrow(_config(db_path, token.session_id, write_enabled=True))
    hub.open(dataclasses.replace(narrowed, token_id=token.id, review_detached=True))  # as a remote grant opens
    nid = note_id(indexed, "Home")
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        assert client.protocol_version == ERAS[mode]
        staged = await client.call_tool("kms_append", {"noteId": nid, "content": "over http, later"})
        answer: dict[str, Any] = staged.structured_content or {}
        assert not staged.is_error and answer["status"] == "staged", answer
        assert "over http, later" not in (vault_dir / "Home.md").read_text()
        done = decide_pending(indexed, answer["pendingId"], True, channel="web", decider="phone")
        assert done["outcome"] == "applied" and done["channel"] == "web"
        assert "over http, later" in (vault_dir / "Home.md").read_text()
        seen = await client.call_tool("kms_pending", {"pendingId": answer["pendingId"]})
    item = (seen.structured_content or {})["items"][0]
    assert item["status"] == "approved" and item["outcome"] == "applied"
    assert item["decidedBy"] == "approved by phone on the review page"
    row = indexed.execute(
        "SELECT session_id, message FROM tool_invocations WHERE id = ?", (item["result"]["invocationId"],)
    ).fetchall()
    assert row == [(token.session_id, f"approved by phone on the review page (pending #{answer['pendingId']})")]


async def test_a_staged_answer_over_http_names_the_item_page_which_asks_a_signed_out_visitor_to_sign_in(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, hub_served: tuple[SessionHub, str]
) -> None:
    """The agent can tell the person where to look: the service that opened the session knows its own address,
    and the answer names the staged call's own page under it. A signed-out visit is told how to get in; once
    signed in, the same address shows the call."""
    import httpx

    from server.activity import review_access

    hub, url = hub_served
    token, secret = tokens.create(indexed, label="agent", scopes=Scopes.parse("tier:write approval"))
    narrowed = token.scopes.narrow(_config(db_path, token.session_id, write_enabled=True))
    hub.open(dataclasses.replace(narrowed, token_id=token.id, review_detached=True))
    origin = url.removesuffix("/mcp")
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        staged = await client.call_tool("kms_append", {"noteId": note_id(indexed, "Home"), "content": "look here"})
        answer: dict[str, Any] = staged.structured_content or {}
        later = await client.call_tool("kms_pending", {"pendingId": answer["pendingId"]})
    page = f"{origin}/review/pending/{answer['pendingId']}"
    assert (later.structured_content or {})["items"][0]["reviewUrl"] == page  # asked again later: the same page
    assert answer["status"] == "staged" and answer["reviewUrl"] == page, answer
    assert page in answer["review"] and "kms review" in answer["review"]
    with httpx.Client(timeout=10) as browser:
        signed_out = browser.get(page)
        assert signed_out.status_code == 401 and "Sign in to review" in signed_out.text
        assert "kms review" in signed_out.text and "look here" not in signed_out.text
        link = review_access.create_link(indexed, "login")
        assert browser.get(f"{origin}/review/login?t={link}", follow_redirects=True).status_code == 200
        signed_in = browser.get(page)
    assert (
        signed_in.status_code == 200 and f"#{answer['pendingId']}" in signed_in.text and "look here" in signed_in.text
    )
