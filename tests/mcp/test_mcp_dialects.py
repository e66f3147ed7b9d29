"""What an agent sees of a vault in its own dialect, through the real MCP server and client (issue 13):
Markdown links as backlinks, titles and descriptions searched, tool ids, link-safe renames and moves of
Markdown links, and names across vaults."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.dialect_vaults import add_indexed, by_path
from support.mcp_session import TierSwitches, mcp_client
from support.organize import assert_index_is_fresh
from support.vaults import write

ON: TierSwitches = {"write_enabled": True, "edit_enabled": True, "organize_enabled": True}


async def call(client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    return {**result.structured_content, "_error": result.is_error}


async def test_markdown_links_are_backlinks_and_titles_are_searched(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    add_indexed(conn, "obsidian", tmp_path / "obsidian")
    add_indexed(conn, "dendron", tmp_path / "dendron")
    async with mcp_client(db_path) as client:
        out = await call(client, "kms_get_backlinks", {"noteId": by_path(conn, "obsidian", "Projects/Beta.md")})
        assert sorted(b["path"] for b in out["backlinks"]) == ["Home.md", "Projects/Alpha.md"]
        alpha = next(b for b in out["backlinks"] if b["path"] == "Projects/Alpha.md")
        assert alpha["title"] == "Project Alpha" and "Beta.md" in alpha["snippet"]
        hits = (await call(client, "kms_search", {"query": "quasar"}))["hits"]
        assert [(h["vault"], h["path"], h["title"]) for h in hits] == [("dendron", "dendron.topic.lookup.md", "Lookup")]
        read = await call(client, "kms_read", {"noteId": "9a2lookupzz0p1q7x3mm4kd"})  # Dendron's own id
        assert not read["_error"] and read["noteId"] == by_path(conn, "dendron", "dendron.topic.lookup.md")
        assert read["parent"] == {
            "noteId": by_path(conn, "dendron", "dendron.topic.md"),
            "title": "Topic",
            "path": "dendron.topic.md",
        }  # its Dendron hierarchy, as kms show gives it
        assert "parent" not in await call(client, "kms_read", {"noteId": by_path(conn, "obsidian", "Home.md")})
        from server.index.notes import set_hidden

        set_hidden(conn, "dendron:dendron.topic.md", True)  # a hidden ancestor is never named
        read = await call(client, "kms_read", {"noteId": "9a2lookupzz0p1q7x3mm4kd"})
        assert not read["_error"] and "parent" not in read and "Topic" not in str(read)


async def test_rename_and_move_rewrite_markdown_links_in_their_style(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    root = tmp_path / "obsidian"
    add_indexed(conn, "obsidian", root)
    async with mcp_client(db_path, **ON) as client:
        out = await call(
            client, "kms_rename", {"noteId": by_path(conn, "obsidian", "Projects/Beta.md"), "title": "Beta launch"}
        )
        assert not out["_error"], out
        assert out["linksRewritten"]["notes"] == ["Home.md", "Projects/Alpha.md"]
        home = (root / "Home.md").read_text()
        assert "[Beta](Projects/Beta%20launch.md)" in home and "[the plan](<Projects/Beta launch.md#Plan>)" in home
        assert "[beta](Beta%20launch.md)" in (root / "Projects/Alpha.md").read_text()
        out = await call(
            client, "kms_move", {"noteId": by_path(conn, "obsidian", "Projects/Alpha.md"), "folder": "Archive/2024"}
        )
        assert not out["_error"], out
        assert "[[Projects/Alpha]]" not in (root / "Home.md").read_text()
        assert "[[Archive/2024/Alpha]]" in (root / "Home.md").read_text()
        moved = (root / "Archive/2024/Alpha.md").read_text()
        assert "[beta](../../Projects/Beta%20launch.md)" in moved and "[up](../../Home.md)" in moved
        back = await call(client, "kms_get_backlinks", {"noteId": by_path(conn, "obsidian", "Projects/Beta launch.md")})
        assert sorted(b["path"] for b in back["backlinks"]) == ["Archive/2024/Alpha.md", "Home.md"]
    assert_index_is_fresh(conn, root, tmp_path)


async def test_a_name_in_two_vaults_is_refused_with_candidates_and_vault_path_names_one(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from server.index.indexer import index_vault
    from server.vault.registry import add_vault

    for name in ("a", "b"):
        write(tmp_path / name / "Shared.md", f"# Shared in {name}\n")
        index_vault(conn, add_vault(conn, tmp_path / name, name))
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_append", {"noteId": "Shared", "content": "more"})
        assert out["_error"] and out["error"] == "invalid-input", out
        assert out["candidates"] == ["a:Shared.md", "b:Shared.md"]
        out = await call(client, "kms_append", {"noteId": "b:Shared.md", "content": "more"})
        assert not out["_error"] and out["vault"] == "b", out
    assert (tmp_path / "a" / "Shared.md").read_text() == "# Shared in a\n"
    assert (tmp_path / "b" / "Shared.md").read_text() == "# Shared in b\n\nmore\n"
