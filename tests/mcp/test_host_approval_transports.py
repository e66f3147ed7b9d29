"""Approve inside the host over the real transports (issue 27): a spawned ``kms mcp`` over stdio and the kms
service over Streamable HTTP, each in both protocol eras; the host's answer applies the staged call and the
decision names the host as its channel."""

from __future__ import annotations

import sys
from pathlib import Path

import apsw
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from support.mcp_stdio import server_env
from support.vaults import note_id
from test_service_http import MODES, running, token, two_vaults  # noqa: F401 - fixtures

from server.activity import approvals
from server.mcp import service

ERAS = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}


async def _apply(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    assert "kms_" in params.message and "@@" in params.message
    return types.ElicitResult(action="accept", content={"decision": "apply"})


@pytest.mark.parametrize("era", ERAS)
async def test_over_stdio_the_host_approves_a_staged_call(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, tmp_path: Path, era: str
) -> None:
    nid = note_id(indexed, "Home")
    env = server_env(db_path, tmp_path, KMS_AGENT_WRITE_TOOLS_ENABLED="1", KMS_WRITE_APPROVAL="always")
    params = StdioServerParameters(command=sys.executable, args=["-m", "kmscli", "mcp"], env=env, cwd=str(tmp_path))
    async with Client(params, read_timeout_seconds=30, mode=ERAS[era], elicitation_callback=_apply) as client:
        assert client.protocol_version == era
        result = await client.call_tool("kms_append", {"noteId": nid, "content": "approved over stdio"})
    assert not result.is_error, result.structured_content
    assert "approved over stdio" in (vault_dir / "Home.md").read_text()
    done = approvals.list_pending(indexed, status=None)[0]
    assert done.status == "approved" and done.channel == "host" and done.outcome == "applied"


@pytest.mark.parametrize("mode", MODES)
async def test_over_http_the_host_approves_a_tokens_staged_call(
    running: service.ServiceState,  # noqa: F811 - the fixtures imported above
    two_vaults: apsw.Connection,  # noqa: F811
    mode: str,
) -> None:
    _, secret = token(two_vaults, "tier:write approval")
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
    async with (
        http,
        Client(streamable_http_client(running.url, http_client=http), mode=mode, elicitation_callback=_apply) as client,
    ):
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")  # both eras
        result = await client.call_tool("kms_create", {"title": "Over HTTP", "vault": "a", "content": "hello"})
        assert not result.is_error, result.structured_content
    done = approvals.list_pending(two_vaults, status=None)[0]
    assert done.status == "approved" and done.channel == "host" and done.outcome == "applied"
    assert two_vaults.execute("SELECT count(*) FROM notes WHERE title = 'Over HTTP'").fetchall() == [(1,)]
