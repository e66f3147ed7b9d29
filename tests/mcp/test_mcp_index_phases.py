"""Agents calling while a new vault is searchable but its links and tags are still being built (issue 42):
the answers of the tools that read them say so (``index``) rather than being silently shorter, and stop
saying it once the vault is complete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.cold_index import add_killed_between_phases
from support.gen_vault import generate
from support.mcp_session import mcp_client

from server.index.cold import NOT_YET
from server.index.indexer import index_vault
from server.store.db import connect
from server.vault.registry import get_vault

BUILT_LATER = ("kms_list_tags", "kms_start", "kms_list_folder", "kms_list_properties", "kms_status")


async def answer(client: Any, name: str, args: dict | None = None) -> dict:
    result = await client.call_tool(name, args or {})
    data = json.loads(result.content[0].text)
    assert not result.is_error and "error" not in data, data
    return dict(data)


async def test_answers_say_links_and_tags_are_still_being_built_until_the_vault_is_complete(
    tmp_path: Path, db_path: Path
) -> None:
    gen = generate(tmp_path / "gen", notes=450)
    add_killed_between_phases(db_path, gen, "gen")
    async with mcp_client(db_path) as client:
        found = await answer(client, "kms_search", {"query": "alpha"})
        assert found["hits"] and found["index"] == NOT_YET  # searchable already, and says what is not there yet
        note = found["hits"][0]["noteId"]
        for name in BUILT_LATER:
            assert (await answer(client, name)).get("index") == NOT_YET, name
        assert (await answer(client, "kms_get_backlinks", {"noteId": note})).get("index") == NOT_YET
        assert (await answer(client, "kms_read", {"noteId": note})).get("index") == NOT_YET
        conn = connect(db_path)
        assert index_vault(conn, get_vault(conn, "gen")).completed
        conn.close()
        found = await answer(client, "kms_search", {"query": "alpha"})
        assert found["hits"] and "index" not in found
        tags = await answer(client, "kms_list_tags")
        assert tags["tags"] and "index" not in tags
        for name in BUILT_LATER:
            assert "index" not in await answer(client, name), name
