"""The read tools agents trip on, through the real MCP server and client: names not only ids, kms_read's
section, maxTokens and outgoing links, kms_list_tags paging, page sizes for agent hosts, and the
unknown-tool error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw
from support.mcp_session import mcp_client
from support.vaults import note_id, write

from server.index.indexer import index_vault
from server.index.note_data import unfence
from server.index.notes import set_hidden
from server.vault.registry import add_vault

PLAN = (
    "# Plan\n\nIntro line.\n\n## Tasks\n\n- buy seeds\n- dig beds\n\n### Later\n\n- mulch\n\n"
    "## Notes\n\nSee [[Seeds]], [[Seeds|again]], [[Tools]], [[Nowhere]], [[Plan]] and [[Secret]].\n"
)


async def call(client: Any, name: str, args: dict) -> tuple[dict, bool]:
    result = await client.call_tool(name, args)
    return result.structured_content, bool(result.is_error)


def _vault(conn: apsw.Connection, tmp_path: Path) -> dict[str, str]:
    root = tmp_path / "garden"
    write(root / "Plan.md", PLAN)
    write(root / "Seeds.md", "# Seeds\n\nBeans and peas. Back to [[Plan]].\n")
    write(root / "sheds/Tools.md", "---\naliases: [Kit]\n---\n# Tools\n\nSpade.\n")
    write(root / "Secret.md", "# Secret\n\nHidden. [[Plan]]\n")
    index_vault(conn, add_vault(conn, root, "garden"))
    set_hidden(conn, "Secret", True)
    return {t: note_id(conn, t) for t in ("Plan", "Seeds", "Tools")}


async def test_read_tools_take_a_title_path_or_alias(conn: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    ids = _vault(conn, tmp_path)
    async with mcp_client(db_path) as client:
        for ref in (ids["Tools"], "Tools", "tools", "sheds/Tools.md", "sheds/Tools", "Kit", "garden:sheds/Tools.md"):
            data, is_error = await call(client, "kms_read", {"noteId": ref})
            assert not is_error and data["noteId"] == ids["Tools"], (ref, data)
        for ref in (ids["Plan"], "Plan", "Plan.md"):
            data, is_error = await call(client, "kms_get_backlinks", {"noteId": ref})
            assert not is_error and data["noteId"] == ids["Plan"], (ref, data)
            assert [b["title"] for b in data["backlinks"]] == ["Seeds"]  # not the hidden note
        data, is_error = await call(client, "kms_read", {"noteId": "Seedz"})
        assert is_error and data["error"] == "not-found" and "Seeds" in data["suggestions"]
        assert "did you mean" in data["message"]
        for ref in ("Secret", "Secret.md"):  # hidden: as if absent, and never suggested
            data, is_error = await call(client, "kms_read", {"noteId": ref})
            assert is_error and data["error"] == "not-found" and "Secret" not in json.dumps(data).replace(ref, "")


async def test_read_gives_links_and_one_section(conn: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    ids = _vault(conn, tmp_path)
    async with mcp_client(db_path) as client:
        data, _ = await call(client, "kms_read", {"noteId": "Plan"})
        assert data["links"] == [
            {"noteId": ids["Seeds"], "title": "Seeds", "path": "Seeds.md"},
            {"noteId": ids["Tools"], "title": "Tools", "path": "sheds/Tools.md"},
        ]
        assert data["unresolvedLinks"] == ["Nowhere", "Secret"]  # a hidden note is as if absent
        assert "section" not in data and unfence(data["body"]) == PLAN
        tasks, is_error = await call(client, "kms_read", {"noteId": "Plan", "section": "Tasks"})
        assert not is_error and tasks["section"] == "## Tasks"
        assert unfence(tasks["body"]) == "## Tasks\n\n- buy seeds\n- dig beds\n\n### Later\n\n- mulch\n"
        assert tasks["bodyChars"] == len(unfence(tasks["body"])) and tasks["nextCursor"] is None
        for section in ("## Tasks", "tasks", "Plan > Tasks"):
            assert (await call(client, "kms_read", {"noteId": "Plan", "section": section}))[0]["body"] == tasks["body"]
        later, _ = await call(client, "kms_read", {"noteId": "Plan", "section": "Later"})
        assert unfence(later["body"]) == "### Later\n\n- mulch\n"
        data, is_error = await call(client, "kms_read", {"noteId": "Plan", "section": "Nope"})
        assert is_error and data["error"] == "invalid-input" and "## Tasks" in data["message"]


async def test_read_pages_by_tokens(conn: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    root = tmp_path / "v"
    body = "# Long\n\n" + "".join(f"## Part {i}\n\n" + "word " * 300 + "\n\n" for i in range(60))
    write(root / "Long.md", body)
    index_vault(conn, add_vault(conn, root, "v"))
    async with mcp_client(db_path) as client:
        first, _ = await call(client, "kms_read", {"noteId": "Long"})
        # the default page stays well inside an agent host's output limit (Claude Code: 25,000 tokens)
        assert len(json.dumps(first).encode()) // 4 <= 15_000 and first["nextCursor"]
        pages, cursor = [], None
        while True:
            args = {"noteId": "Long", "maxTokens": 1000, **({"cursor": cursor} if cursor else {})}
            page, is_error = await call(client, "kms_read", args)
            assert not is_error and len(unfence(page["body"]).encode()) <= 4000
            pages.append(unfence(page["body"]))
            cursor = page["nextCursor"]
            if not cursor:
                break
        assert "".join(pages) == body and len(pages) > 20
        # a section pages too, and its cursor is the section's
        part, _ = await call(client, "kms_read", {"noteId": "Long", "section": "Part 3", "maxTokens": 200})
        rest, is_error = await call(
            client, "kms_read", {"noteId": "Long", "section": "Part 3", "maxTokens": 200, "cursor": part["nextCursor"]}
        )
        assert not is_error and (unfence(part["body"]) + unfence(rest["body"])).startswith("## Part 3\n\nword word")
        data, is_error = await call(client, "kms_read", {"noteId": "Long", "cursor": part["nextCursor"]})
        assert is_error and data["error"] == "invalid-input"
        for bad in (199, 24_001, "1000"):
            data, is_error = await call(client, "kms_read", {"noteId": "Long", "maxTokens": bad})
            assert is_error and data["error"] == "invalid-input"


async def test_list_tags_pages_through_thousands_of_tags(conn: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    root = tmp_path / "tags"
    for n in range(50):
        tags = " ".join(f"#t{n}x{k}" for k in range(100)) + (" #common" if n % 2 else "") + " #all"
        write(root / f"N{n}.md", f"# N{n}\n\n{tags}\n")
    index_vault(conn, add_vault(conn, root, "tags"))
    async with mcp_client(db_path) as client:
        first, _ = await call(client, "kms_list_tags", {})
        assert len(first["tags"]) == 500 and first["nextCursor"]
        assert first["tags"][:2] == [{"tag": "all", "count": 50}, {"tag": "common", "count": 25}]
        seen, cursor = [], None
        while True:
            args = {"limit": 777, **({"cursor": cursor} if cursor else {})}
            page, is_error = await call(client, "kms_list_tags", args)
            assert not is_error and not page.get("truncated")
            seen += page["tags"]
            cursor = page["nextCursor"]
            if not cursor:
                break
        assert len(seen) == 5002 and len({t["tag"] for t in seen}) == 5002
        assert seen == sorted(seen, key=lambda t: (-t["count"], t["tag"]))
        data, is_error = await call(client, "kms_list_tags", {"cursor": "garbage"})
        assert is_error and data["error"] == "invalid-input"


async def test_unknown_tool_lists_only_this_sessions_tools(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    _vault(conn, tmp_path)
    async with mcp_client(db_path) as client:
        data, is_error = await call(client, "kms_nope", {})
        assert is_error and data["error"] == "invalid-input" and "kms_search" in data["message"]
        assert "kms_append" not in data["message"] and "kms_move" not in data["message"]
        assert "kms_recall" in data["message"]
    async with mcp_client(db_path, write_enabled=True) as client:
        data, _ = await call(client, "kms_nope", {})
        assert "kms_append" in data["message"]
