"""A damaged or unreachable database: ``kms mcp`` over real stdio still lists every tool, and every call
answers ``database`` with what is wrong and what the person should run (never an empty tool list)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.mcp_stdio import stdio_server

from server.mcp.tools import REGISTRY
from server.store.db import connect


@pytest.mark.parametrize("kind", ["damaged", "not-kms", "unreachable"])
async def test_every_tool_is_listed_and_answers_what_to_run(tmp_path: Path, kind: str) -> None:
    if kind == "damaged":  # a kms database whose header was overwritten: kms repair rebuilds it
        db, expect = tmp_path / "kms.db", "kms repair"
        connect(db).close()
        data = db.read_bytes()
        db.write_bytes(b"\x00GARBAGE" * 8 + data[64:])
    elif kind == "not-kms":  # a note copied over KMS_DB_PATH: never kms's to repair
        db, expect = tmp_path / "kms.db", "not a kms database"
        db.write_text("# not a database\nsome notes\n" * 100)
    else:
        (tmp_path / "a-file").write_text("x")
        db, expect = tmp_path / "a-file" / "kms.db", "KMS_DB_PATH"
    async with stdio_server(db, tmp_path) as client:
        tools = (await client.list_tools()).tools
        answers = {t.name: await client.call_tool(t.name, {}) for t in tools}
        read = await client.call_tool("kms_read", {"noteId": "Home"})
    assert [t.name for t in tools] == [s.name for s in REGISTRY]  # every tier's: the agent sees them all
    for name, result in [*answers.items(), ("kms_read", read)]:
        assert result.is_error, name
        data = result.structured_content
        assert data["error"] == "database" and expect in data["message"], (name, data)
        assert "no tool works until the person fixes it" in data["message"]
    if kind == "not-kms":
        assert db.read_bytes()[:16] == b"# not a database"  # untouched
    elif kind == "unreachable":
        assert not db.exists()
