"""The organize tools and the privacy path rules (``privacy.hide_folders``, ``.kmsignore``), through a real
MCP client: a note a rule hides stays where it is when its visible parent folder moves (it would be
published at its new path), and no note is moved or renamed to where a rule hides it, as kms_create
refuses (dogfood findings mcp #1 and #3)."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import pytest
from support.mcp_session import TierSwitches, mcp_client
from support.organize import index, make_vault, vault_bytes

ON: TierSwitches = {"write_enabled": True, "edit_enabled": True, "organize_enabled": True}
FILES = {
    "areas/x.md": "# x\n\nsee [[health/Med]] and [m](health/Med.md)\n",
    "areas/health/Med.md": "# Med\n\nbloodwork results, back to [[areas/x]]\n",
    "drafts/Other.md": "# Other\n",
    "drafts/deep/Second.md": "# Second\n",
}


def _rules(root: Path, how: str) -> None:
    from server.config.settings import set_value

    if how == "hide_folders":
        set_value(
            "privacy.hide_folders",
            ["areas/health", "journal"],
            path=Path(os.environ["KMS_CONFIG"]),
            env={},
            has_vault=True,
        )
    else:
        (root / ".kmsignore").write_text("areas/health/\njournal/\n*.private.md\n")


async def call(client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    return {**result.structured_content, "_error": result.is_error}


@pytest.mark.parametrize("how", ["hide_folders", "kmsignore"])
async def test_renaming_a_visible_folder_leaves_its_hidden_subfolder_hidden_where_it_is(
    conn: apsw.Connection, db_path: Path, tmp_path: Path, how: str
) -> None:
    root = make_vault(tmp_path / "v", FILES)
    _rules(root, how)
    index(conn, root)
    async with mcp_client(db_path, **ON) as client:
        dry = await call(client, "kms_rename_folder", {"folder": "areas", "name": "zones", "dryRun": True})
        out = await call(client, "kms_rename_folder", {"folder": "areas", "name": "zones"})
        hits = (await client.call_tool("kms_search", {"query": "bloodwork"})).structured_content["hits"]
        read = await call(client, "kms_read", {"noteId": "zones/health/Med.md"})
    for answer in (dry, out):
        assert not answer["_error"], answer
        assert (answer["notesMoved"], answer["hiddenNotesMoved"], answer["linkingNotes"]) == (1, 0, 1)
        assert "health" not in str(answer) and "Med" not in str(answer)
    assert hits == [] and read["error"] == "not-found"
    assert (root / "areas/health/Med.md").is_file() and not (root / "zones/health").exists()
    assert (root / "zones/x.md").read_text() == "# x\n\nsee [[health/Med]] and [m](../areas/health/Med.md)\n"
    assert (root / "areas/health/Med.md").read_text() == "# Med\n\nbloodwork results, back to [[zones/x]]\n"
    hidden = conn.execute("SELECT path FROM notes WHERE hidden_at IS NOT NULL").fetchall()
    assert hidden == [("areas/health/Med.md",)]


@pytest.mark.parametrize("how", ["hide_folders", "kmsignore"])
async def test_no_note_is_moved_or_renamed_where_a_rule_hides_it(
    conn: apsw.Connection, db_path: Path, tmp_path: Path, how: str
) -> None:
    root = make_vault(tmp_path / "v", FILES)
    _rules(root, how)
    index(conn, root)
    before = vault_bytes(root)
    async with mcp_client(db_path, **ON) as client:
        calls: list[tuple[str, dict]] = [
            ("kms_create", {"title": "New", "folder": "journal", "content": "x"}),
            ("kms_move", {"noteId": "drafts/Other.md", "folder": "journal"}),
            ("kms_move", {"noteId": "drafts/Other.md", "folder": "areas/health"}),
            ("kms_move_folder", {"folder": "drafts/deep", "to": "journal"}),
            ("kms_move_folder", {"folder": "drafts/deep", "to": "journal", "dryRun": True}),
            ("kms_rename_folder", {"folder": "drafts", "name": "journal"}),
        ]
        if how == "kmsignore":
            calls.append(("kms_rename", {"noteId": "drafts/Other.md", "title": "y.private"}))
        answers = [await call(client, tool, args) for tool, args in calls]
    for (tool, args), answer in zip(calls, answers, strict=True):
        assert answer["error"] == "folder-denied", (tool, args, answer)
        assert "Med" not in answer["message"]
    assert vault_bytes(root) == before


@pytest.mark.parametrize("how", ["hide_folders", "kmsignore"])
async def test_a_symlinked_folder_into_a_hidden_one_is_as_hidden_as_it(
    conn: apsw.Connection, db_path: Path, tmp_path: Path, how: str
) -> None:
    """A privacy rule is judged where a note would really be: ``drafts/portal -> ../areas/health`` is the hidden
    folder under another name, so no note is created, moved or renamed through it, and a name tried there
    (the hidden note's own) is refused as the folder is, never answered ``exists`` (issue 37)."""
    root = make_vault(tmp_path / "v", FILES)
    (root / "drafts" / "portal").symlink_to(Path("..") / "areas" / "health", target_is_directory=True)
    _rules(root, how)
    index(conn, root)
    before = vault_bytes(root)
    async with mcp_client(db_path, **ON) as client:
        calls: list[tuple[str, dict]] = [
            ("kms_create", {"title": "New", "folder": "drafts/portal", "content": "x"}),
            ("kms_create", {"title": "Med", "folder": "drafts/portal", "content": "x"}),
            ("kms_create", {"title": "New", "folder": "drafts/portal/deeper", "content": "x"}),
            ("kms_move", {"noteId": "drafts/Other.md", "folder": "drafts/portal"}),
            ("kms_move_folder", {"folder": "drafts/deep", "to": "drafts/portal"}),
        ]
        answers = [await call(client, tool, args) for tool, args in calls]
    for (tool, args), answer in zip(calls, answers, strict=True):
        assert answer["error"] == "folder-denied", (tool, args, answer)
        assert "Med" not in answer["message"]
    assert vault_bytes(root) == before
