"""`kms_inventory` pages stay small enough for an agent host to take whole, however long the notes' AI
summaries are (Claude Code refuses an MCP result over 25,000 tokens): a page stops early and its cursor
goes on from its last card, so a walk still lists every note exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import apsw
from support.mcp_session import mcp_client
from support.vaults import write

from server.index.indexer import index_vault
from server.index.listing import PAGE_BUDGET_CHARS
from server.store.db import scalar
from server.vault.registry import get_vault

if TYPE_CHECKING:
    from mcp_types import TextContent


async def test_long_summaries_shorten_the_page_not_the_walk(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    summary = "A long summary sentence about this note. " * 45  # ~1,900 characters each (unclipped)
    for i in range(120):
        write(
            vault_dir / "summarised" / f"Long {i:02}.md",
            f"<!-- kms:summary hash=000000000000 -->\n{summary}\n<!-- /kms:summary -->\n\n# Long {i}\n\nbody\n",
        )
    index_vault(indexed, get_vault(indexed, "sample"))
    visible = scalar(indexed, "SELECT count(*) FROM notes WHERE hidden_at IS NULL")

    seen: list[str] = []
    pages: list[int] = []
    async with mcp_client(db_path) as client:
        cursor = None
        while True:
            result = await client.call_tool("kms_inventory", {"limit": 100, **({"cursor": cursor} if cursor else {})})
            assert not result.is_error, result.structured_content
            data = result.structured_content
            [content] = result.content
            # one card past the budget at most
            assert len(cast("TextContent", content).text) <= PAGE_BUDGET_CHARS + 10_000
            pages.append(len(data["notes"]))
            seen += [n["noteId"] for n in data["notes"]]
            cursor = data["nextCursor"]
            if cursor is None:
                break
    assert len(seen) == len(set(seen)) == visible
    assert max(pages) < 100 and len(pages) >= 4  # 120 x 1.9 KB of summaries take 4 or more 60 KB pages
