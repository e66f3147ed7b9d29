"""A sync tool's conflict copy through a real MCP client: not a note to search or read, named in
``kms_status`` with the note it conflicts with, and an agent's write to that note answers ``conflict``."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.mcp_session import mcp_client
from support.vaults import note_id

from server.index.indexer import index_vault
from server.vault.registry import get_vault

COPY = "Home.sync-conflict-20261201-101500-ABCDEFG.md"


async def test_copy_quarantined_listed_in_status_and_writes_refused(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    home = next(vault_dir.rglob("Home.md"))
    home.with_name(COPY).write_text("# Home\n\nthe other machine's quokka text\n", encoding="utf-8")
    index_vault(indexed, get_vault(indexed, "sample"))
    nid = note_id(indexed, "Home")
    async with mcp_client(db_path, write_enabled=True) as client:
        found = await client.call_tool("kms_search", {"query": "quokka"})
        assert found.structured_content["hits"] == []
        status = (await client.call_tool("kms_status", {})).structured_content
        assert status["conflicts"]["count"] == 1
        [item] = status["conflicts"]["notes"]
        assert (item["noteId"], item["source"]) == (nid, "syncthing")
        result = await client.call_tool("kms_append", {"noteId": nid, "content": "an agent's line"})
        assert result.is_error and result.structured_content["error"] == "conflict"
        assert "open syncthing conflict" in result.structured_content["message"]
    assert "an agent's line" not in home.read_text(encoding="utf-8")
