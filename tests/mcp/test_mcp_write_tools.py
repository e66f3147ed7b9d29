"""The write tools through a real MCP client: gate, listing, annotations, errors, provenance."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.mcp_session import mcp_client
from support.vaults import note_id

WRITE_TOOLS = {"kms_create", "kms_append", "kms_update_properties", "kms_insert_at"}


def provenance(conn: apsw.Connection) -> list[tuple]:
    return conn.execute("SELECT tool, status, error FROM tool_invocations ORDER BY id").fetchall()


async def test_write_tools_hidden_from_listing_when_writes_off(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path, write_enabled=False) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert not names & WRITE_TOOLS
        result = await client.call_tool("kms_append", {"noteId": note_id(indexed, "Home"), "content": "x"})
        assert result.is_error and result.structured_content["error"] == "feature-disabled"
    assert provenance(indexed) == [("kms_append", "error", "feature-disabled")]


async def test_each_flag_gates_writes_independently(indexed: apsw.Connection, db_path: Path) -> None:
    for off in ("enabled", "read_enabled", "write_enabled"):
        flags = {"enabled": True, "read_enabled": True, "write_enabled": True, off: False}
        async with mcp_client(db_path, **flags) as client:
            result = await client.call_tool("kms_create", {"title": f"t {off}", "folder": "drafts"})
            assert result.structured_content["error"] == "feature-disabled", off


async def test_annotations_of_write_tools(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path, write_enabled=True) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in WRITE_TOOLS:
        a = tools[name].annotations
        assert a.read_only_hint is False and a.destructive_hint is False and a.open_world_hint is False
        assert a.idempotent_hint is (name == "kms_update_properties")


async def test_create_append_insert_update_land_in_the_file(indexed: apsw.Connection, db_path: Path,
                                                            vault_dir: Path) -> None:
    async with mcp_client(db_path, write_enabled=True, allowlist=("drafts",)) as client:
        created = await client.call_tool("kms_create", {"title": "Plan: v2/next", "folder": "drafts",
                                                         "content": "# Plan\n\nfirst", "tags": ["plan"]})
        assert not created.is_error, created.structured_content
        c = created.structured_content
        assert c["path"] == "drafts/Plan- v2-next.md" and c["bytesBefore"] == 0 and c["bytesAfter"] > 0
        nid = c["noteId"]
        appended = (await client.call_tool("kms_append", {"noteId": nid, "content": "second"})).structured_content
        assert appended["linesAdded"] >= 1 and appended["bytesAfter"] > appended["bytesBefore"]
        inserted = await client.call_tool("kms_insert_at", {"noteId": nid, "content": "zero",
                                                            "position": {"beforeHeading": "Plan"}})
        assert not inserted.is_error, inserted.structured_content
        props = await client.call_tool("kms_update_properties", {"noteId": nid, "set": {"status": "draft"}})
        assert not props.is_error, props.structured_content
        read = (await client.call_tool("kms_read", {"noteId": nid})).structured_content
    text = (vault_dir / "drafts" / "Plan- v2-next.md").read_text()
    assert "status: draft" in text and text.index("zero") < text.index("# Plan") < text.index("second")
    assert read["frontmatter"]["status"] == "draft" and "plan" in read["tags"]
    assert [s for _t, s, _e in provenance(indexed)] == ["success"] * 4


async def test_error_kinds_come_back_typed_and_recorded(indexed: apsw.Connection, db_path: Path,
                                                        vault_dir: Path) -> None:
    home = note_id(indexed, "Home")
    before = (vault_dir / "Home.md").read_bytes()
    async with mcp_client(db_path, write_enabled=True, allowlist=("drafts",), per_minute=100) as client:
        async def err(tool: str, args: dict) -> str:
            r = await client.call_tool(tool, args)
            assert r.is_error, r.structured_content
            assert r.structured_content["message"]
            return r.structured_content["error"]

        assert await err("kms_append", {"noteId": "nope", "content": "x"}) == "not-found"
        assert await err("kms_append", {"noteId": home, "content": "x"}) == "folder-denied"
        assert await err("kms_create", {"title": "Home", "folder": "projects"}) == "folder-denied"
        assert await err("kms_create", {"title": "x", "tags": ["#bad"]}) == "invalid-input"
        assert await err("kms_create", {"title": "x", "content": "y" * 100_001}) == "invalid-input"
        assert await err("kms_update_properties", {"noteId": home, "set": {"kms_provenance": "x"}}) == \
            "invalid-input"
        assert await err("kms_update_properties", {"noteId": home, "set": {"a": 1}, "version": "0" * 64}) == \
            "conflict"
        assert await err("kms_insert_at", {"noteId": home, "content": "x",
                                           "position": {"afterHeading": "x", "atLine": 1}}) == "invalid-input"
        assert await err("kms_create", {"title": "Indexing notes for coding agents", "folder": "drafts"}) == \
            "already-exists"
    assert (vault_dir / "Home.md").read_bytes() == before
    statuses = [s for _t, s, _e in provenance(indexed)]
    assert len(statuses) == 9 and "success" not in statuses


async def test_rate_limit_is_per_session_and_counted(indexed: apsw.Connection, db_path: Path) -> None:
    nid = note_id(indexed, "Indexing notes for coding agents")
    async with mcp_client(db_path, write_enabled=True, per_minute=3, session_id="s-flood") as client:
        results = [await client.call_tool("kms_append", {"noteId": nid, "content": f"line {i}"}) for i in range(5)]
    errors = [r.structured_content.get("error") for r in results]
    assert errors == [None, None, None, "rate-limited", "rate-limited"]
    assert results[3].structured_content["retryAfterMs"] > 0
    row = indexed.execute("SELECT window_count, total, per_minute FROM write_counters WHERE session_id = 's-flood'")
    assert row.fetchall() == [(3, 3, 3)]
