"""``kms_history`` through a real MCP client: a visible note's versions with who and how, pages, a diff; a
hidden note (also one hidden later) has none, and no version seen while a note was hidden is told."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest
from support.mcp_session import TierSwitches, mcp_client
from support.organize import index
from support.vaults import write

from server.index.incremental import reindex_file
from server.index.notes import set_hidden
from server.vault.registry import get_vault

ON: TierSwitches = {"write_enabled": True}


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    root = tmp_path / "v"
    write(root / "Home.md", "# Home\n\nThe person's note.\n")
    write(root / "Later.md", "# Later\n\nfine for now\n")
    index(conn, root)
    return root


async def call(client: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.structured_content
    return result.structured_content


async def error(client: Any, tool: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error
    return str(result.content[0].text)


async def test_history_tells_versions_who_and_how_pages_and_diffs(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    async with mcp_client(db_path, **ON) as client:
        session = client.runner.session.id
        done = await call(client, "kms_append", {"noteId": "Home", "content": "an agent's line"})
        write(vault / "Home.md", (vault / "Home.md").read_text() + "the person's line\n")
        reindex_file(conn, get_vault(conn, "v"), "Home.md")
        first = await call(client, "kms_history", {"noteId": "Home", "limit": 2})
        rest = await call(client, "kms_history", {"noteId": "Home", "limit": 2, "cursor": first["nextCursor"]})
        diffed = await call(client, "kms_history", {"noteId": "Home", "diffFrom": 1, "diffTo": 2})
    assert [v["version"] for v in first["versions"]] == [3, 2] and rest["versions"][0]["version"] == 1
    assert rest["nextCursor"] is None
    outside, agent = first["versions"]
    assert outside["who"]["by"] == "outside kms" and outside["how"] == "watch"
    assert agent["who"] == {
        "by": "agent",
        "how": "kms_append",
        "sessionId": session,
        "invocationId": done["invocationId"],
    }
    assert agent["sizeChange"] > 0
    assert "+an agent's line" in diffed["diff"] and not diffed["diffTruncated"]


async def test_a_hidden_note_has_no_history_also_when_hidden_later(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    write(vault / "Later.md", "# Later\n\nzqxsecret now in it\n")
    reindex_file(conn, get_vault(conn, "v"), "Later.md")
    set_hidden(conn, "Later.md", True)
    async with mcp_client(db_path) as client:
        text = await error(client, "kms_history", {"noteId": "Later"})
    assert "not-found" in text and "zqx" not in text


async def test_versions_seen_while_hidden_are_never_told(vault: Path, conn: apsw.Connection, db_path: Path) -> None:
    v = get_vault(conn, "v")
    write(vault / "Home.md", "---\nprivate: true\n---\n# Home\n\nzqxsecret plans\n")
    reindex_file(conn, v, "Home.md")
    write(vault / "Home.md", "# Home\n\nall public again\n")
    reindex_file(conn, v, "Home.md")
    async with mcp_client(db_path) as client:
        seen = await call(client, "kms_history", {"noteId": "Home"})
        text = await error(client, "kms_history", {"noteId": "Home", "diffFrom": 2, "diffTo": 3})
    assert [x["version"] for x in seen["versions"]] == [3, 1]
    assert "zqx" not in str(seen) and "zqx" not in text
