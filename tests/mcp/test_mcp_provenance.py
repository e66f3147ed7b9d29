"""What kms records, shown to the agent through a real MCP client: who created and last changed a note and
how (kms_read), who/how per entry (kms_list_recent), backlink totals and a cursor; hidden notes never show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest
from support.mcp_session import TierSwitches, mcp_client
from support.organize import index
from support.vaults import note_id, write

ON: TierSwitches = {"write_enabled": True, "edit_enabled": True, "organize_enabled": True}


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    from server.index.notes import set_hidden

    root = tmp_path / "v"
    write(root / "Home.md", "# Home\n\nThe person's note.\n")
    write(root / "notes/Target.md", "# Target\n\nlinked a lot\n")
    for i in range(30):
        write(root / f"links/Linker {i:02d}.md", f"# Linker {i}\n\nsee [[notes/Target]]\n")
    write(root / "private/Secret.md", "secret [[notes/Target]]\n")
    index(conn, root)
    set_hidden(conn, "private/Secret.md", True)
    return root


async def call(client: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.structured_content
    return result.structured_content


def reindex(conn: apsw.Connection) -> None:
    from server.index.indexer import index_vault
    from server.vault.registry import get_vault

    index_vault(conn, get_vault(conn, "v"))


async def test_read_tells_who_created_and_last_changed_a_note_and_how(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    async with mcp_client(db_path, **ON) as client:
        session = client.runner.session.id
        home = await call(client, "kms_read", {"noteId": "Home"})
        made = await call(client, "kms_create", {"title": "New", "content": "hello"})
        new = await call(client, "kms_read", {"noteId": made["noteId"]})
        appended = await call(client, "kms_append", {"noteId": "Home", "content": "more"})
        home2 = await call(client, "kms_read", {"noteId": "Home"})
        renamed = await call(client, "kms_rename", {"noteId": "notes/Target.md", "title": "Goal"})
        goal = await call(client, "kms_read", {"noteId": "notes/Goal.md"})
        linker = await call(client, "kms_read", {"noteId": "links/Linker 03.md"})
    assert home["createdBy"]["by"] == "person" and home["lastChangedBy"]["by"] == "person"
    assert home["lastChangedBy"]["how"].startswith("outside kms") and home["lastChangedBy"]["sessionId"] is None
    agent = {"by": "agent", "sessionId": session}
    assert {k: new["createdBy"][k] for k in ("by", "how", "sessionId")} == {**agent, "how": "kms_create"}
    assert new["createdBy"]["invocationId"] == made["invocationId"] == new["lastChangedBy"]["invocationId"]
    assert home2["createdBy"]["by"] == "person"
    assert (home2["lastChangedBy"]["how"], home2["lastChangedBy"]["invocationId"]) == (
        "kms_append",
        appended["invocationId"],
    )
    for read in (goal, linker):  # the moved note, and a note whose link the rename rewrote
        assert (read["lastChangedBy"]["how"], read["lastChangedBy"]["sessionId"]) == ("kms_rename", session)
        assert read["lastChangedBy"]["invocationId"] == renamed["invocationId"]
        assert read["createdBy"]["by"] == "person"

    write(vault / "Home.md", "# Home\n\nThe person's note, edited in their editor.\n")
    reindex(conn)
    async with mcp_client(db_path, **ON) as client:
        home3 = await call(client, "kms_read", {"noteId": "Home"})
        recent = await call(client, "kms_list_recent", {"limit": 50})
    assert home3["lastChangedBy"]["by"] == "person" and home3["lastChangedBy"]["invocationId"] is None
    by_path = {n["path"]: n["lastChangedBy"] for n in recent["notes"]}
    assert by_path["Home.md"]["by"] == "person" and by_path["New.md"]["how"] == "kms_create"
    assert by_path["notes/Goal.md"]["how"] == "kms_rename" and by_path["notes/Goal.md"]["sessionId"] == session
    assert "private/Secret.md" not in by_path and "Secret" not in str(recent)


async def test_backlinks_give_their_total_and_a_cursor_past_the_limit(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    target = note_id(conn, "Target")
    async with mcp_client(db_path) as client:
        first = await call(client, "kms_get_backlinks", {"noteId": target})
        second = await call(client, "kms_get_backlinks", {"noteId": target, "cursor": first["nextCursor"]})
        small = await call(client, "kms_get_backlinks", {"noteId": target, "limit": 50})
        wrong = await client.call_tool("kms_get_backlinks", {"noteId": "Home", "cursor": first["nextCursor"]})
    assert first["total"] == 30 and len(first["backlinks"]) == 25 and first["nextCursor"]  # the hidden one not
    assert second["total"] == 30 and len(second["backlinks"]) == 5 and second["nextCursor"] is None
    paths = [b["path"] for b in first["backlinks"] + second["backlinks"]]
    assert sorted(paths) == sorted(b["path"] for b in small["backlinks"]) and len(set(paths)) == 30
    assert small["nextCursor"] is None and "Secret" not in str(small)
    assert wrong.is_error and wrong.structured_content["error"] == "invalid-input"
