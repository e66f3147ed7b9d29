"""The organise tools' blast radius, case-only renames, and kms_create_many's rate-limit slots, through a real
MCP client."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from support.mcp_session import TierSwitches, mcp_client
from support.organize import assert_index_is_fresh, index, make_vault, vault_bytes
from support.vaults import note_id

ON: TierSwitches = {"write_enabled": True, "edit_enabled": True, "organize_enabled": True}


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    root = make_vault(tmp_path / "v")
    index(conn, root)
    return root


async def call(client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    return {**result.structured_content, "_error": result.is_error}


def _full_diff(before: str, after: str) -> tuple[int, int]:
    """Lines removed and added between two whole texts (the reference the windowed count must match)."""
    from server.writes.edits import blast_radius

    return blast_radius(before, after)


async def test_rename_reports_its_real_blast_radius(vault: Path, conn: apsw.Connection, db_path: Path) -> None:
    paths = {
        "notes/Target.md": "notes/Goal.md",
        "Linker.md": "Linker.md",
        "Crlf.md": "Crlf.md",
        "private/Secret.md": "private/Secret.md",
    }
    before = {p: (vault / p).read_bytes() for p in paths}
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
    assert not out["_error"], out
    after = {p: (vault / q).read_bytes() for p, q in paths.items()}
    assert out["filesChanged"] == 4
    assert out["bytesBefore"] == sum(map(len, before.values())) and out["bytesBefore"] > 0
    assert out["bytesAfter"] == sum(map(len, after.values())) and out["bytesAfter"] != out["bytesBefore"]
    radius = [_full_diff(before[p].decode(), after[p].decode()) for p in paths]
    assert (out["linesRemoved"], out["linesAdded"]) == (sum(r[0] for r in radius), sum(r[1] for r in radius))
    assert out["linesRemoved"] >= 8  # Linker.md alone changes 6 lines, Crlf.md and Secret.md one each
    row = conn.execute(
        "SELECT bytes_before, bytes_after FROM tool_invocations WHERE id = ?", (out["invocationId"],)
    ).fetchall()
    assert row == [(out["bytesBefore"], out["bytesAfter"])]  # what the dashboard shows


async def test_trash_and_move_report_bytes_and_files(vault: Path, conn: apsw.Connection, db_path: Path) -> None:
    size = (vault / "drafts/Draft.md").stat().st_size
    async with mcp_client(db_path, **ON) as client:
        trashed = await call(client, "kms_trash", {"noteId": note_id(conn, "Draft")})
        moved = await call(client, "kms_move", {"noteId": note_id(conn, "Other"), "folder": "archive"})
    assert (trashed["filesChanged"], trashed["bytesBefore"], trashed["bytesAfter"]) == (1, size, size)
    assert (trashed["linesRemoved"], trashed["linesAdded"]) == (0, 0)
    other = (vault / "archive/Other.md").stat().st_size
    assert (moved["filesChanged"], moved["bytesBefore"], moved["bytesAfter"]) == (1, other, other)


async def test_a_case_only_rename_goes_through_a_temp_name_and_reverts(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from server.writes.undo.revert import revert

    before = vault_bytes(vault)
    nid = note_id(conn, "Target")
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename", {"noteId": nid, "title": "TARGET", "keepAlias": False})
    assert not out["_error"], out
    assert out["path"] == "notes/TARGET.md" and out["noteId"] == nid
    assert sorted(p.name for p in (vault / "notes").iterdir()) == ["TARGET.md"]  # no temp file, no old name
    assert (vault / "notes/TARGET.md").read_bytes() == before["notes/Target.md"].replace(
        b"[[Target#Part]]", b"[[TARGET#Part]]"
    )
    assert "title [[TARGET]], path [[notes/TARGET]]," in (vault / "Linker.md").read_text()
    assert conn.execute("SELECT id, title FROM notes WHERE path = 'notes/TARGET.md'").fetchall() == [(nid, "TARGET")]
    assert_index_is_fresh(conn, vault, tmp_path)
    revert(conn, out["invocationId"])
    assert vault_bytes(vault) == before
    assert sorted(p.name for p in (vault / "notes").iterdir()) == ["Target.md"]
    assert_index_is_fresh(conn, vault, tmp_path)


async def test_renaming_to_the_very_same_name_is_refused(vault: Path, conn: apsw.Connection, db_path: Path) -> None:
    before = vault_bytes(vault)
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename", {"noteId": note_id(conn, "Target"), "title": "Target"})
    assert out["error"] == "invalid-input" and "already at" in out["message"]
    assert vault_bytes(vault) == before


@pytest.mark.parametrize(
    "first",
    [
        {"title": "Draft", "folder": "drafts"},  # exists already
        {"title": "Out", "folder": "private"},
    ],
)  # a denied folder
async def test_create_many_whose_first_note_fails_takes_one_slot_per_note_written(
    vault: Path, db_path: Path, first: dict
) -> None:
    notes = [first, {"title": "One", "folder": "drafts"}, {"title": "Two", "folder": "drafts"}]
    async with mcp_client(db_path, write_enabled=True, per_minute=3, allowlist=("drafts",)) as client:
        out = await call(client, "kms_create_many", {"notes": notes})
        third = await call(client, "kms_create", {"title": "Three", "folder": "drafts"})
        fourth = await call(client, "kms_create", {"title": "Four", "folder": "drafts"})
    assert [r.get("ok", False) for r in out["results"]] == [False, True, True], out
    assert not third["_error"], third  # two notes written: two slots of three, the third is free
    assert fourth["error"] == "rate-limited"


async def test_create_many_where_every_note_fails_takes_no_slot(vault: Path, db_path: Path) -> None:
    async with mcp_client(db_path, write_enabled=True, per_minute=2) as client:
        out = await call(client, "kms_create_many", {"notes": [{"title": "Draft", "folder": "drafts"}] * 2})
        ok = [await call(client, "kms_create", {"title": f"N{i}", "folder": "drafts"}) for i in range(3)]
    assert out["created"] == 0 and out["failed"] == 2
    assert [r["_error"] for r in ok] == [False, False, True]
