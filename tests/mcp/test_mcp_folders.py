"""kms_move_folder and kms_rename_folder through a real MCP client: one unit, every link style, ids kept,
hidden notes counted and never named (a hidden folder answered as a missing one), the per-call limit,
a dry run, revert byte for byte."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from support.mcp_session import TierSwitches, mcp_client
from support.organize import assert_index_is_fresh, index, make_vault, vault_bytes

ON: TierSwitches = {"write_enabled": True, "edit_enabled": True, "organize_enabled": True}

HOME = (
    '---\nrelated: "[[proj/Alpha]]"\n---\n# Home\n\n'
    "path [[proj/Alpha]], alias [[proj/sub/Beta Two|b]], ending [[sub/Beta Two#Part]], slash [[/proj/Alpha]]\n"
    "embed ![[proj/Alpha.md]], title [[Alpha]], table | [[proj/Alpha\\|a]] |\n"
    "md [a](proj/Alpha.md) root [c](/proj/Alpha.md) encoded [d](proj/sub/Beta%20Two.md) "
    "angle [e](<proj/sub/Beta Two.md#Part>)\n\n"
    "code `[[proj/Alpha]]` stays\n\n"
    "[r]: proj/Alpha.md\n"
)
FILES = {
    "Home.md": HOME,
    "notes/Deep.md": "see [b](../proj/sub/Beta%20Two.md) and [[proj/Alpha#Part|p]]\r\n",
    "proj/Alpha.md": "# Alpha\n\n## Part\n\nsibling [[sub/Beta Two]] and [s](sub/Beta%20Two.md), "
    "home [h](../Home.md), self [[proj/Alpha#Part]]\n",
    "proj/sub/Beta Two.md": "# Beta Two\n\n## Part\n\n"
    "up [[proj/Alpha]] and [u](../Alpha.md) and [home](../../Home.md)\n",
    "proj/Secret.md": "secret [[proj/Alpha]]\n",
    "private/Hidden.md": "hidden link [[proj/sub/Beta Two]]\n",
    "Other.md": "# Other\n\nonly [[Alpha]] by name\n",
}
HIDDEN = ("proj/Secret.md", "private/Hidden.md")


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    from server.index.notes import set_hidden

    root = make_vault(tmp_path / "v", FILES)
    (root / "proj/diagram.png").write_bytes(b"\x89PNG not a note")
    index(conn, root)
    for path in HIDDEN:
        set_hidden(conn, path, True)
    return root


def ids(conn: apsw.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT path, id FROM notes"))


async def call(client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    return {**result.structured_content, "_error": result.is_error}


async def test_move_folder_moves_every_note_and_rewrites_every_link_style(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    before_ids = ids(conn)
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_move_folder", {"folder": "proj", "to": "archive/2024"})
    assert not out["_error"], out
    assert (out["folder"], out["newFolder"], out["path"]) == ("proj", "archive/2024/proj", "archive/2024/proj")
    assert (out["notesMoved"], out["hiddenNotesMoved"], out["linkingNotes"]) == (3, 1, 4)
    assert out["linksRewritten"] == {"notes": ["Home.md", "notes/Deep.md"], "hiddenNotes": 1}
    assert out["filesChanged"] == 6  # three moved, three linking notes rewritten (Other.md links by name)
    assert "Secret" not in str(out) and "Hidden" not in str(out)
    new = "archive/2024/proj"
    assert (vault / "Home.md").read_text() == HOME.replace("[[proj/", f"[[{new}/").replace(
        "[[/proj/", f"[[/{new}/"
    ).replace("(proj/", f"({new}/").replace("(/proj/", f"(/{new}/").replace("(<proj/", f"(<{new}/").replace(
        "[r]: proj/", f"[r]: {new}/"
    ).replace("[[sub/Beta Two#Part]]", f"[[{new}/sub/Beta Two#Part]]").replace(f"`[[{new}/Alpha]]`", "`[[proj/Alpha]]`")
    assert (vault / "notes/Deep.md").read_bytes() == (
        f"see [b](../{new}/sub/Beta%20Two.md) and [[{new}/Alpha#Part|p]]\r\n".encode()
    )
    assert (vault / new / "Alpha.md").read_text() == (
        f"# Alpha\n\n## Part\n\nsibling [[{new}/sub/Beta Two]] and [s](sub/Beta%20Two.md), "
        f"home [h](../../../Home.md), self [[{new}/Alpha#Part]]\n"
    )
    assert (vault / new / "sub/Beta Two.md").read_text() == (
        f"# Beta Two\n\n## Part\n\nup [[{new}/Alpha]] and [u](../Alpha.md) and [home](../../../../Home.md)\n"
    )
    assert (vault / new / "Secret.md").read_text() == f"secret [[{new}/Alpha]]\n"
    assert (vault / "private/Hidden.md").read_text() == f"hidden link [[{new}/sub/Beta Two]]\n"
    assert (vault / "Other.md").read_text() == FILES["Other.md"]
    assert (vault / "proj/diagram.png").exists() and not (vault / "proj/sub").exists()  # other files stay
    after_ids = ids(conn)
    for path in ("proj/Alpha.md", "proj/sub/Beta Two.md", "proj/Secret.md"):
        assert after_ids[path.replace("proj/", f"{new}/", 1)] == before_ids[path]  # ids kept
    assert_index_is_fresh(conn, vault, tmp_path)


async def test_rename_folder_then_revert_gives_back_every_byte_and_the_index(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from server.writes.undo.revert import preview_revert, revert

    before, before_ids = vault_bytes(vault), ids(conn)
    async with mcp_client(db_path, **ON) as client:
        out = await call(client, "kms_rename_folder", {"folder": "proj", "name": "Projects"})
    assert not out["_error"], out
    assert out["newFolder"] == "Projects" and (vault / "Projects/sub/Beta Two.md").exists()
    assert "path [[Projects/Alpha]]," in (vault / "Home.md").read_text()
    assert "[home](../../Home.md)" in (vault / "Projects/sub/Beta Two.md").read_text()  # depth unchanged
    assert_index_is_fresh(conn, vault, tmp_path)
    plan = preview_revert(conn, out["invocationId"])
    assert plan["canRevert"] and len(plan["files"]) == 6
    done = revert(conn, out["invocationId"])
    assert done["reverted"] == out["invocationId"] and "indexWarning" not in done, done
    assert vault_bytes(vault) == before and ids(conn) == before_ids
    assert_index_is_fresh(conn, vault, tmp_path)


async def test_dry_run_counts_and_the_limit_refuses_before_anything_changes(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    before = vault_bytes(vault)
    async with mcp_client(db_path, **ON, max_files_per_call=5) as client:
        dry = await call(client, "kms_move_folder", {"folder": "proj", "to": "archive", "dryRun": True})
        broad = await call(client, "kms_rename_folder", {"folder": "proj", "name": "P2"})
    assert not dry["_error"], dry
    assert (dry["dryRun"], dry["changed"], dry["withinLimit"]) == (True, False, False)
    assert (dry["notesMoved"], dry["hiddenNotesMoved"], dry["linkingNotes"]) == (3, 1, 4)
    assert broad["error"] == "too-broad" and broad["count"] == 7 and broad["limit"] == 5
    assert vault_bytes(vault) == before


async def test_refusals_change_nothing(vault: Path, conn: apsw.Connection, db_path: Path) -> None:
    from support.vaults import write

    write(vault / "taken/proj/Alpha.md", "already here\n")
    before = vault_bytes(vault)
    async with mcp_client(
        db_path,
        **ON,
        allowlist=("proj", "proj/sub", "archive/proj", "archive/proj/sub", "taken/proj", "taken/proj/sub"),
    ) as client:
        missing = await call(client, "kms_move_folder", {"folder": "proj/nope", "to": "archive"})
        into_self = await call(client, "kms_move_folder", {"folder": "proj", "to": "proj/sub"})
        escape = await call(client, "kms_move_folder", {"folder": "proj", "to": "../out"})
        denied = await call(client, "kms_move_folder", {"folder": "proj", "to": "elsewhere"})
        sub_denied = await call(client, "kms_move_folder", {"folder": "proj", "to": "archive/x"})
        trash = await call(client, "kms_move_folder", {"folder": "proj", "to": ".trash"})
        slash = await call(client, "kms_rename_folder", {"folder": "proj", "name": "a/b"})
        exists = await call(client, "kms_move_folder", {"folder": "proj", "to": "taken"})
        hidden_only = await call(client, "kms_move_folder", {"folder": "private", "to": "archive"})
    assert missing["error"] == "not-found" and into_self["error"] == "invalid-input"
    assert escape["error"] == "invalid-input" and denied["error"] == "folder-denied"
    assert sub_denied["error"] == "folder-denied"
    assert trash["error"] == "invalid-input" and slash["error"] == "invalid-input"
    assert exists["error"] == "already-exists" and "Alpha" in exists["message"]
    assert hidden_only["error"] == "not-found"  # as a missing folder: the allowlist is no oracle either
    assert vault_bytes(vault) == before


async def test_a_folder_of_hidden_notes_only_answers_as_a_missing_one(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    before = vault_bytes(vault)
    async with mcp_client(db_path, **ON) as client:
        dry = await call(client, "kms_rename_folder", {"folder": "private", "name": "vault", "dryRun": True})
        out = await call(client, "kms_rename_folder", {"folder": "private", "name": "vault"})
        missing = await call(client, "kms_rename_folder", {"folder": "nothere", "name": "vault", "dryRun": True})
    assert dry["error"] == out["error"] == missing["error"] == "not-found"
    assert dry["message"].replace("private", "nothere") == missing["message"]
    assert vault_bytes(vault) == before


async def test_kms_move_given_a_folder_points_to_kms_move_folder(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    before = vault_bytes(vault)
    async with mcp_client(db_path, **ON) as client:
        folder = await call(client, "kms_move", {"noteId": "proj/sub", "folder": "archive"})
        hidden_only = await call(client, "kms_move", {"noteId": "private", "folder": "archive"})
    assert folder["error"] == "not-found" and "kms_move_folder" in folder["message"]
    assert hidden_only["error"] == "not-found" and "folder" not in hidden_only["message"]  # hidden: not told
    assert vault_bytes(vault) == before
