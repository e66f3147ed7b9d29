"""kms_move, kms_rename and kms_trash through a real MCP client: link-safe, all or nothing, revertible."""

from __future__ import annotations

import os
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
    from server.index.notes import set_hidden

    set_hidden(conn, "private/Secret.md", True)
    return root


async def call(client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    return {**result.structured_content, "_error": result.is_error}


async def test_rename_rewrites_every_link_form_in_its_style(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
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
    assert goal.startswith("---\naliases: [Tee, Target]\n---\n# Target\n"), goal
    assert "see [[Goal#Part]]" in goal  # its link to itself too
    assert conn.execute("SELECT id FROM notes WHERE path = 'notes/Goal.md'").fetchall() == [(nid,)]
    assert_index_is_fresh(conn, vault, tmp_path)


async def test_rename_then_revert_gives_back_every_byte_and_the_index(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from server.writes.undo.revert import preview_revert, revert

    before = vault_bytes(vault)
    nid = note_id(conn, "Target")
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename", {"noteId": nid, "title": "Goal"})
    plan = preview_revert(conn, out["invocationId"])
    assert plan["canRevert"] and [f["path"] for f in plan["files"]] == [
        "notes/Target.md",
        "Crlf.md",
        "Linker.md",
        "private/Secret.md",
    ]
    assert plan["files"][0]["newPath"] == "notes/Goal.md"
    assert "\n-title [[Target]]," in plan["files"][2]["diff"] and "\n+title [[Goal]]," in plan["files"][2]["diff"]
    done = revert(conn, out["invocationId"])
    assert done["reverted"] == out["invocationId"] and "indexWarning" not in done, done
    assert vault_bytes(vault) == before
    assert conn.execute("SELECT id FROM notes WHERE path = 'notes/Target.md'").fetchall() == [(nid,)]
    assert_index_is_fresh(conn, vault, tmp_path)
    row = conn.execute("SELECT actor, tool, status, reverts_id FROM tool_invocations ORDER BY id DESC LIMIT 1")
    assert row.fetchall() == [("person", "revert", "success", out["invocationId"])]


async def test_revert_refuses_when_any_touched_file_changed_and_changes_nothing(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    from server.errors import KmsError
    from server.writes.undo.revert import preview_revert, revert

    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
    with (vault / "Crlf.md").open("ab") as f:
        f.write(b"a person's line\r\n")
    now = vault_bytes(vault)
    plan = preview_revert(conn, out["invocationId"])
    assert not plan["canRevert"] and "Crlf.md was edited since" in plan["reason"]
    with pytest.raises(KmsError) as e:
        revert(conn, out["invocationId"])
    assert e.value.kind == "conflict" and "Crlf.md" in e.value.message
    assert vault_bytes(vault) == now


async def test_move_rewrites_path_links_keeps_title_links_and_the_id(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    nid = note_id(conn, "Target")
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_move", {"noteId": nid, "folder": "archive/2024"})
    assert not out["_error"], out
    assert out["path"] == "archive/2024/Target.md" and out["noteId"] == nid
    linker = (vault / "Linker.md").read_text()
    assert "path [[archive/2024/Target]]," in linker and "suffix [[archive/2024/Target.md|x]]" in linker
    assert "slash [[/archive/2024/Target]]" in linker and "title [[Target]]," in linker
    assert '"[[archive/2024/Target|t]]"' in linker
    assert (vault / "Crlf.md").read_bytes() == b"# Crlf\r\n\r\nsee [[Target]] and [[archive/2024/Target#Part|p]]\r\n"
    assert out["linksRewritten"] == {"notes": ["Crlf.md", "Linker.md"], "hiddenNotes": 0}
    assert_index_is_fresh(conn, vault, tmp_path)


async def test_move_and_rename_refusals_change_nothing(vault: Path, conn: apsw.Connection, db_path: Path) -> None:
    from support.vaults import write

    write(vault / "notes/Goal.md", "taken\n")
    write(vault / "archive/Target.md", "taken too\n")
    from server.index.indexer import index_vault
    from server.vault.registry import get_vault

    index_vault(conn, get_vault(conn, "v"))
    before = vault_bytes(vault)
    nid = note_id(conn, "Target")
    async with mcp_client(db_path, **ON, allowlist=("notes", "archive", "drafts")) as client:
        exists = await call(client, "kms_rename", {"noteId": nid, "title": "Goal"})
        moved = await call(client, "kms_move", {"noteId": nid, "folder": "archive"})
        denied = await call(client, "kms_move", {"noteId": nid, "folder": "elsewhere"})
        escape = await call(client, "kms_move", {"noteId": nid, "folder": "../out"})
        same = await call(client, "kms_move", {"noteId": nid, "folder": "notes"})
        hidden = await call(client, "kms_rename", {"noteId": "private/Secret.md", "title": "Open"})
    assert exists["error"] == "already-exists" and moved["error"] == "already-exists"
    assert denied["error"] == "folder-denied" and escape["error"] == "invalid-input"
    assert same["error"] == "invalid-input" and hidden["error"] == "not-found"
    assert vault_bytes(vault) == before


async def test_too_broad_counts_every_file_and_changes_nothing(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    before = vault_bytes(vault)
    async with mcp_client(db_path, **ON, max_files_per_call=3) as client:
        out = await call(client, "kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
    assert out["error"] == "too-broad" and out["count"] == 4 and out["limit"] == 3
    assert vault_bytes(vault) == before


async def test_trash_moves_into_dot_trash_reports_links_and_restores(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from server.writes.undo.revert import revert

    before = vault_bytes(vault)
    nid = note_id(conn, "Target")
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_trash", {"noteId": nid})
        assert not out["_error"], out
        gone = await call(client, "kms_read", {"noteId": nid})
    assert out["path"] == ".trash/notes/Target.md"
    assert out["linksLeft"] == {"count": 3, "notes": ["Crlf.md", "Linker.md"], "hiddenNotes": 1}
    assert (vault / ".trash/notes/Target.md").read_bytes() == before["notes/Target.md"]
    assert not (vault / "notes/Target.md").exists() and gone["error"] == "not-found"
    assert_index_is_fresh(conn, vault, tmp_path)
    revert(conn, out["invocationId"])
    assert {k: v for k, v in vault_bytes(vault).items()} == before
    assert conn.execute("SELECT id FROM notes WHERE path = 'notes/Target.md'").fetchall() == [(nid,)]
    assert_index_is_fresh(conn, vault, tmp_path)


async def test_a_person_saving_a_linking_note_mid_rename_never_loses_text(
    vault: Path, conn: apsw.Connection, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The person's save lands between kms's read and its rename: the file is rewritten from their text."""
    from server.writes import multifile

    real = multifile._prepare
    saved = {"n": 0}

    def person_saves_once(ctx, vault_, plan, path):
        prep = real(ctx, vault_, plan, path)
        if plan.path == "Crlf.md" and not saved["n"]:
            saved["n"] = 1
            path.write_bytes(path.read_bytes() + b"typed by the person [[Target]]\r\n")
        return prep

    monkeypatch.setattr(multifile, "_prepare", person_saves_once)
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
    assert not out["_error"], out
    assert (vault / "Crlf.md").read_bytes() == (
        b"# Crlf\r\n\r\nsee [[Goal]] and [[notes/Goal#Part|p]]\r\ntyped by the person [[Goal]]\r\n"
    )


async def test_a_person_saving_continuously_gets_conflict_and_nothing_is_renamed(
    vault: Path, conn: apsw.Connection, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.writes import multifile

    real = multifile._prepare

    def person_keeps_saving(ctx, vault_, plan, path):
        prep = real(ctx, vault_, plan, path)
        if plan.path == "Linker.md":
            path.write_bytes(path.read_bytes() + b"more\n")
        return prep

    before = vault_bytes(vault)
    monkeypatch.setattr(multifile, "_prepare", person_keeps_saving)
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
    assert out["error"] == "conflict" and "Linker.md" in out["message"]
    after = vault_bytes(vault)
    assert after["Linker.md"] == before["Linker.md"] + b"more\nmore\n"  # the person's text, unrenamed
    assert {k: v for k, v in after.items() if k != "Linker.md"} == {k: v for k, v in before.items() if k != "Linker.md"}


async def test_rename_never_writes_outside_the_notes_vault(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """A note of another vault whose link resolved here (no note of that title in its own vault) is left."""
    from support.vaults import write

    other = write(tmp_path / "w" / "Far.md", "far link to [[Target]]\n")
    index(conn, other.parent, "w")
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
    assert not out["_error"], out
    assert other.read_text() == "far link to [[Target]]\n" and "Far.md" not in str(out)


async def test_a_save_during_the_writes_puts_back_every_file_already_written(
    vault: Path, conn: apsw.Connection, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The person saves a linking note after kms's last check but before kms writes it: conflict, and the
    files kms had already written get their old bytes back (never half-renamed), the journal goes."""
    from server.writes import multifile

    before = vault_bytes(vault)
    real_write = multifile._write_in_place
    state = {"n": 0}

    def write_then_person_saves(prep, done):
        real_write(prep, done)
        state["n"] += 1
        if state["n"] == 1:  # after the first linking note is written, the person saves the next one
            with (vault / "Linker.md").open("ab") as f:
                f.write(b"person\n")

    monkeypatch.setattr(multifile, "_write_in_place", write_then_person_saves)
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
    assert out["error"] == "conflict" and "Linker.md" in out["message"]
    after = vault_bytes(vault)
    assert after["Linker.md"] == before["Linker.md"] + b"person\n"
    assert {k: v for k, v in after.items() if k != "Linker.md"} == {k: v for k, v in before.items() if k != "Linker.md"}
    assert not list((db_path.parent / "locks" / "units").iterdir())


async def test_the_index_is_locked_while_files_move_so_the_watcher_cannot_split_a_note(
    vault: Path, conn: apsw.Connection, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watcher indexing the old path between the rename of the file and of its row would drop the note
    and index it again under a new id: the database's write lock is held across both."""
    from server.vault import files as vault_files

    real_write = vault_files.atomic_write
    seen: list[str] = []

    def move_and_probe(*args, **kw):
        n = real_write(*args, **kw)
        other = apsw.Connection(str(db_path))
        other.set_busy_timeout(0)
        try:
            other.execute("BEGIN IMMEDIATE")
            seen.append("free")
            other.execute("ROLLBACK")
        except apsw.BusyError:
            seen.append("locked")
        other.close()
        return n

    from server.writes import multifile

    monkeypatch.setattr(multifile, "atomic_write", move_and_probe)
    nid = note_id(conn, "Target")
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_move", {"noteId": nid, "folder": "archive"})
    assert not out["_error"], out
    assert seen == ["locked"]  # the moved note's new file exists, and no one else may write the index yet
    assert conn.execute("SELECT id FROM notes WHERE path = 'archive/Target.md'").fetchall() == [(nid,)]


async def test_linking_notes_are_rewritten_in_place_keeping_their_inode_and_mode(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    """A linking note keeps what lives on its inode (creation time, mode): kms rewrites it where it is,
    under the unit's journal, which is gone once the rename is recorded. One with another hard link
    (here from outside the vault) gets a file of its own instead: the other name keeps its bytes."""
    linker, crlf, outside = vault / "Linker.md", vault / "Crlf.md", vault.parent / "hard-link.md"
    linker.chmod(0o640)
    os.link(crlf, outside)
    before, outside_bytes = linker.stat(), outside.read_bytes()
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
    assert not out["_error"], out
    after = linker.stat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode) and "[[Goal]]" in linker.read_text()
    assert "[[Goal]]" in crlf.read_text() and outside.read_bytes() == outside_bytes
    assert crlf.stat().st_nlink == 1 and outside.stat().st_nlink == 1
    assert not list((db_path.parent / "locks" / "units").iterdir())


async def test_rename_without_alias_and_to_a_sanitised_title(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    nid = note_id(conn, "Target")
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename", {"noteId": nid, "title": "Plan: v2", "keepAlias": False})
    assert not out["_error"], out
    assert out["path"] == "notes/Plan- v2.md" and out["title"] == "Plan- v2"
    assert (vault / "notes/Plan- v2.md").read_text().startswith("---\naliases: [Tee]\n---\n")
    assert "title [[Plan- v2]], path [[notes/Plan- v2]]," in (vault / "Linker.md").read_text()
    assert_index_is_fresh(conn, vault, tmp_path)
