"""kms_move, kms_rename and kms_trash through a real MCP client: link-safe, all or nothing, revertible."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from support.mcp_session import mcp_client
from support.organize import assert_index_is_fresh, index, make_vault, vault_bytes
from support.vaults import note_id

ON = {"write_enabled": True, "edit_enabled": True, "organize_enabled": True}


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    root = make_vault(tmp_path / "v")
    index(conn, root)
    from server.index.notes import set_hidden

    set_hidden(conn, "private/Secret.md", True)
    return root


async def call(client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    return {**result.structured_content, "_error": result.is_error}


async def test_rename_rewrites_every_link_form_in_its_style(vault: Path, conn: apsw.Connection,
                                                            db_path: Path, tmp_path: Path) -> None:
    nid = note_id(conn, "Target")
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename", {"noteId": nid, "title": "Goal"})
    assert not out["_error"], out
    assert out["noteId"] == nid and out["path"] == "notes/Goal.md" and out["oldPath"] == "notes/Target.md"
    assert out["linksRewritten"] == {"notes": ["Crlf.md", "Linker.md"], "hiddenNotes": 1}
    linker = (vault / "Linker.md").read_text()
    assert linker == (
        '---\nrelated: "[[Goal]]"\nother: ["[[notes/Goal|t]]", "[[Elsewhere]]"]\n---\n'
        "# Linker\n\n"
        "title [[Goal]], path [[notes/Goal]], alias [[Goal|shown]], heading [[Goal#Part]],\n"
        "block [[Goal#^b1]], embed ![[Goal]], suffix [[notes/Goal.md|x]], by alias [[Tee]],\n"
        "spaced [[ Goal | s ]], slash [[/notes/Goal]], case [[Goal]]\n\n"
        "| table | [[Goal\\|a]] |\n| --- | --- |\n\n"
        "code `[[Target]]` stays\n\n```\n[[Target]]\n```\n"
    )
    assert (vault / "Crlf.md").read_bytes() == b"# Crlf\r\n\r\nsee [[Goal]] and [[notes/Goal#Part|p]]\r\n"
    assert (vault / "private/Secret.md").read_text() == "secret link to [[Goal]]\n"
    goal = (vault / "notes/Goal.md").read_text()
    assert not (vault / "notes/Target.md").exists()
    assert goal.startswith("---\naliases: [Tee, Target]\n---\n") or "- Target" in goal, goal
    assert "see [[Goal#Part]]" in goal  # its link to itself too
    assert conn.execute("SELECT id FROM notes WHERE path = 'notes/Goal.md'").fetchall() == [(nid,)]
    assert_index_is_fresh(conn, vault, tmp_path)
