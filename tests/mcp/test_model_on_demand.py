"""A ``kms mcp`` session that never searches by meaning never loads the embedding model; its first search by
meaning does (the real server over stdio, the real model from .cache/models)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import apsw
from support.mcp_stdio import stdio_server

if TYPE_CHECKING:
    from mcp.client import Client


async def semantic_state(client: Client) -> str:
    result = await client.call_tool("kms_status", {})
    return str(result.structured_content["embeddings"]["state"])


async def test_the_model_loads_at_the_first_search_by_meaning(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, embed_model_dir: Path
) -> None:
    async with stdio_server(
        db_path, tmp_path, KMS_EMBED_MODEL_DIR=str(embed_model_dir), KMS_EMBED_ENABLED="1"
    ) as client:
        await client.list_tools()
        await client.call_tool("kms_search", {"query": "auth"})
        started = time.monotonic()
        while time.monotonic() - started < 4.0:  # past the background start (3 s at the latest)
            await anyio.sleep(0.25)
        assert await semantic_state(client) == "not-loaded"
        await client.call_tool("kms_semantic_search", {"query": "how do we handle login failures"})
        with anyio.fail_after(60):
            while await semantic_state(client) != "ready":
                await anyio.sleep(0.2)
