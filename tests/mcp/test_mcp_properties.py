"""Property filters and the properties in use through a real MCP client (issue 29)."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.mcp_session import mcp_client
from support.vaults import index_notes

NOTES = {
    "a.md": "---\nstatus: evergreen\nrating: 4\n---\n# Alpha\n\nplanning notes\n",
    "b.md": "---\nstatus: draft\nrating: 10\n---\n# Beta\n\nplanning notes\n",
    "sub/c.md": "---\nstatus: evergreen\n---\n# Gamma\n\nplanning notes\n",
}


def make(conn: apsw.Connection, tmp_path: Path) -> None:
    index_notes(conn, tmp_path / "v", NOTES)


async def test_where_in_search_semantic_search_and_folder_listing(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    make(conn, tmp_path)
    async with mcp_client(db_path) as client:

        async def call(tool: str, args: dict) -> dict:
            r = await client.call_tool(tool, args)
            assert not r.is_error, (tool, r.structured_content)
            return r.structured_content

        found = await call("kms_search", {"query": "evergreen"})
        assert sorted(h["path"] for h in found["hits"]) == ["a.md", "sub/c.md"]
        found = await call("kms_search", {"query": "planning", "where": ["status:evergreen", "rating>=4"]})
        assert [h["path"] for h in found["hits"]] == ["a.md"]
        listed = await call("kms_search", {"query": "", "where": ["rating>5"]})
        assert [h["path"] for h in listed["hits"]] == ["b.md"]
        meaning = await call("kms_semantic_search", {"query": "planning notes", "where": ["status:draft"]})
        assert [h["path"] for h in meaning["hits"]] == ["b.md"]
        folder = await call("kms_list_folder", {"where": ["-status:draft"]})
        assert [n["path"] for n in folder["notes"]] == ["a.md"]
        assert [(f["path"], f["notes"]) for f in folder["folders"]] == [("sub", 1)]
        folder = await call("kms_list_folder", {"where": ["rating>=4"]})  # sub/c.md has no rating
        assert sorted(n["path"] for n in folder["notes"]) == ["a.md", "b.md"] and folder["folders"] == []
        props = await call("kms_list_properties", {})
        by_key = {p["key"]: p for p in props["properties"]}
        assert by_key["status"]["notes"] == 3 and by_key["status"]["values"][0] == {"value": "evergreen", "notes": 2}
        assert by_key["rating"]["numeric"] is True
        for tool, args in (
            ("kms_search", {"query": "x", "where": ["status"]}),
            ("kms_semantic_search", {"query": "x", "where": ["rating<"]}),
            ("kms_list_folder", {"where": ["a:b", ":"]}),
        ):
            r = await client.call_tool(tool, args)
            assert r.is_error and r.structured_content["error"] == "invalid-input", tool
            assert "status:evergreen" in r.structured_content["message"]


async def test_an_agent_cannot_hide_a_note_with_a_property(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """Inside the allowed folders too: setting the privacy key (``privacy.frontmatter_key``, here ``secret``),
    ``visibility: private`` or a tag ``privacy.hide_tags`` hides is refused, the file untouched, the note still
    readable (the dogfood run's ``private: true`` that made a person's note vanish for every agent)."""
    from server.config.settings import set_value

    config = tmp_path / "config.toml"
    set_value("privacy.frontmatter_key", ["secret"], path=config, env={}, has_vault=True)
    set_value("privacy.hide_tags", ["personal-*"], path=config, env={}, has_vault=True)
    make(conn, tmp_path)
    note = tmp_path / "v" / "a.md"
    before = note.read_bytes()
    async with mcp_client(db_path, write_enabled=True) as client:
        refused = [
            await client.call_tool("kms_update_properties", {"noteId": "a.md", "set": change})
            for change in ({"secret": True}, {"visibility": "private"}, {"tags": ["work", "personal-health"]})
        ]
        after_refusals = note.read_bytes()
        fine = await client.call_tool("kms_update_properties", {"noteId": "a.md", "set": {"private": True}})
        read = await client.call_tool("kms_read", {"noteId": "a.md"})
    for r in refused:
        assert r.is_error and r.structured_content["error"] == "invalid-input", r.structured_content
        assert "personal" not in r.structured_content["message"] and "secret" not in r.structured_content["message"]
    assert after_refusals == before
    assert not fine.is_error, fine.structured_content  # "private" is not this person's privacy key
    assert not read.is_error and read.structured_content["frontmatter"]["private"] is True
