"""A session's write scope is judged where a file really is (issue 37): a symlinked folder inside an allowed
folder (``drafts/portal -> ../archive``) leads no write outside ``write.allowlist`` or a token's ``folder:``
scopes, nor outside the vault; a refused call leaves nothing behind (no folder, no file); and a move or
rename never rewrites the links of notes the session may not write (it is refused, counting them, hidden
ones included and not told apart)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.mcp_session import mcp_client
from support.mcp_stdio import stdio_server

from server.index.indexer import index_vault
from server.vault.registry import add_vault

ON: dict[str, Any] = {"write_enabled": True, "edit_enabled": True, "organize_enabled": True, "per_minute": 1000}
# the two ways a session's folders are narrowed: the person's settings and a service token's ``folder:``
SCOPES: dict[str, dict[str, Any]] = {"allowlist": {"allowlist": ("drafts",)}, "token": {"token_folders": ("drafts",)}}


def portal_vault(root: Path, outside: Path) -> None:
    """``drafts/portal`` leads to ``archive/`` (inside the vault, outside ``drafts``), ``drafts/exit`` out of
    the vault; ``drafts/alias.md`` is a symlinked note whose file is ``archive/old.md``."""
    for folder in ("drafts/sub", "archive", "other"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    outside.mkdir()
    (root / "drafts" / "a.md").write_text("# a\n\nalpha\n")
    (root / "drafts" / "sub" / "n.md").write_text("# n\n\nin sub\n")
    (root / "archive" / "old.md").write_text("# old\n\nkept\n")
    (root / "drafts" / "portal").symlink_to(Path("..") / "archive", target_is_directory=True)
    (root / "drafts" / "exit").symlink_to(outside, target_is_directory=True)
    (root / "drafts" / "alias.md").symlink_to(Path("..") / "archive" / "old.md")


def tree(*roots: Path) -> dict[str, bytes | None]:
    """Every file and folder (symlinks as links) under ``roots``: a folder maps to None."""
    out: dict[str, bytes | None] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames:
                p = Path(dirpath) / name
                out[str(p)] = f"-> {os.readlink(p)}".encode() if p.is_symlink() else None
            for name in filenames:
                p = Path(dirpath) / name
                out[str(p)] = f"-> {os.readlink(p)}".encode() if p.is_symlink() else p.read_bytes()
    return out


def refusal(r: Any) -> dict[str, Any]:
    """The refusal a call answered (kms_create_many's: its one note's)."""
    if not r.is_error and r.structured_content.get("results"):
        assert r.structured_content["created"] == 0, r.structured_content
        return dict(r.structured_content["results"][0])
    assert r.is_error, r.structured_content
    return dict(r.structured_content)


# each call would, today, write through drafts/portal into archive/ (or move archive/old.md itself)
PORTAL_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "move into the portal": ("kms_move", {"noteId": "drafts/a.md", "folder": "drafts/portal"}),
    "move below the portal": ("kms_move", {"noteId": "drafts/a.md", "folder": "drafts/portal/new"}),
    "move a folder into the portal": ("kms_move_folder", {"folder": "drafts/sub", "to": "drafts/portal"}),
    "rename a folder onto the portal": ("kms_rename_folder", {"folder": "drafts/sub", "name": "portal"}),
    "create below the portal": ("kms_create", {"title": "New", "folder": "drafts/portal/new"}),
    "create many below the portal": (
        "kms_create_many",
        {"notes": [{"title": "New", "folder": "drafts/portal/new"}]},  # (answers per note)
    ),
    "create in the portal": ("kms_create", {"title": "New", "folder": "drafts/portal"}),
    "rename a symlinked note": ("kms_rename", {"noteId": "drafts/alias.md", "title": "Taken"}),
    "move a symlinked note": ("kms_move", {"noteId": "drafts/alias.md", "folder": "drafts/sub"}),
    "trash a symlinked note": ("kms_trash", {"noteId": "drafts/alias.md"}),
    "append to a symlinked note": ("kms_append", {"noteId": "drafts/alias.md", "content": "more"}),
}


@pytest.mark.parametrize("what", PORTAL_CALLS)
@pytest.mark.parametrize("scope", SCOPES)
async def test_no_write_goes_through_a_symlinked_folder_out_of_the_session_s_folders(
    conn: apsw.Connection, db_path: Path, tmp_path: Path, scope: str, what: str
) -> None:
    root, outside = tmp_path / "v", tmp_path / "outside"
    portal_vault(root, outside)
    index_vault(conn, add_vault(conn, root, "v"))
    before = tree(root, outside)
    tool, args = PORTAL_CALLS[what]
    async with mcp_client(db_path, **SCOPES[scope], **ON) as client:
        err = refusal(await client.call_tool(tool, args))
    assert err["error"] == "folder-denied", err
    assert "archive" in err["message"], err  # it says where the file really is
    assert tree(root, outside) == before  # nothing moved, written or made (no empty folder)


async def test_inside_the_scope_a_symlink_to_an_allowed_place_is_no_portal(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """What the scope allows still works, through a link that stays in it too (control: passes on main)."""
    root, outside = tmp_path / "v", tmp_path / "outside"
    portal_vault(root, outside)
    (root / "drafts" / "inner").symlink_to("sub", target_is_directory=True)
    index_vault(conn, add_vault(conn, root, "v"))
    async with mcp_client(db_path, allowlist=("drafts",), **ON) as client:
        ok = await client.call_tool("kms_move", {"noteId": "drafts/a.md", "folder": "drafts/inner"})
        assert not ok.is_error, ok.structured_content
        ok = await client.call_tool("kms_create", {"title": "Made", "folder": "drafts/inner/new"})
        assert not ok.is_error, ok.structured_content
    assert (root / "drafts" / "sub" / "a.md").read_text() == "# a\n\nalpha\n"
    assert (root / "drafts" / "sub" / "new" / "Made.md").exists()


async def test_with_no_allowlist_a_write_really_outside_the_vault_or_its_trash_is_refused(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """With no allowlist at all, a path whose real place is outside the vault is still refused (the session's
    vault is a scope too), and so is a trash that is really another folder of the vault (``.trash ->
    archive``: kms_trash would put the note in archive/); each refusal leaves nothing behind."""
    root, outside = tmp_path / "v", tmp_path / "outside"
    portal_vault(root, outside)
    (root / ".trash").symlink_to("archive", target_is_directory=True)
    index_vault(conn, add_vault(conn, root, "v"))
    before = tree(root, outside)
    calls = [
        ("kms_create", {"title": "Out", "folder": "drafts/exit/deeper"}),
        ("kms_move", {"noteId": "drafts/a.md", "folder": "drafts/exit/deeper"}),
        ("kms_move_folder", {"folder": "drafts/sub", "to": "drafts/exit/deeper"}),
        ("kms_trash", {"noteId": "drafts/a.md"}),
    ]
    async with mcp_client(db_path, **ON) as client:
        for tool, args in calls:
            err = refusal(await client.call_tool(tool, args))
            assert err["error"] == "invalid-input", (tool, err)
            assert "outside the vault" in err["message"] or ".trash folder leads elsewhere" in err["message"], err
            assert tree(root, outside) == before, tool
    assert list(outside.iterdir()) == []


async def test_under_approval_a_rename_rewriting_links_outside_the_scope_is_refused_not_staged(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """The person is not asked to approve what the session may not do: the refusal comes at once."""
    root = tmp_path / "v"
    linked_vault(root)
    index_vault(conn, add_vault(conn, root, "v"))
    before = tree(root)
    async with mcp_client(db_path, allowlist=("drafts",), approval="always", approval_timeout=1, **ON) as client:
        err = refusal(await client.call_tool("kms_rename", {"noteId": "drafts/a.md", "title": "b"}))
    assert (err["error"], err["notesOutsideScope"]) == ("folder-denied", 2), err
    assert conn.execute("SELECT count(*) FROM pending_writes").fetchone() == (0,)
    assert tree(root) == before


def linked_vault(root: Path) -> None:
    """``drafts/a.md`` is linked from inside drafts/, from ``archive/`` and from a hidden note."""
    for folder in ("drafts", "archive", "private"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "drafts" / "a.md").write_text("# a\n\nalpha\n")
    (root / "drafts" / "near.md").write_text("# near\n\nsee [[a]]\n")
    (root / "archive" / "ref.md").write_text("# ref\n\nsee [[a]] and [a](../drafts/a.md)\n")
    (root / "private" / "diary.md").write_text(
        "---\nprivate: true\n---\n# diary\n\nsee [[a]] and [a](../drafts/a.md)\n"
    )


@pytest.mark.parametrize("scope", SCOPES)
async def test_a_rename_that_would_rewrite_links_outside_the_scope_is_refused_counting_them(
    conn: apsw.Connection, db_path: Path, tmp_path: Path, scope: str
) -> None:
    root = tmp_path / "v"
    linked_vault(root)
    index_vault(conn, add_vault(conn, root, "v"))
    assert conn.execute("SELECT count(*) FROM notes WHERE hidden_at IS NOT NULL").fetchone() == (1,)
    before = tree(root)
    calls = [  # a title of the agent's choosing would land in notes it may not write
        ("kms_rename", {"noteId": "drafts/a.md", "title": "A title the agent chose " + "x" * 170}),
        ("kms_move", {"noteId": "drafts/a.md", "folder": "drafts/deeper"}),  # their path links change
    ]
    async with mcp_client(db_path, **SCOPES[scope], **ON) as client:
        for tool, args in calls:
            err = refusal(await client.call_tool(tool, args))
            assert err["error"] == "folder-denied", (tool, err)
            assert err["notesOutsideScope"] == 2, (tool, err)  # archive/ref.md and the hidden one, one number
            assert "2 notes" in err["message"], err
            assert "diary" not in str(err) and "private" not in str(err), err  # the hidden note is never named
            assert tree(root) == before, tool
    assert (root / "private" / "diary.md").read_text().endswith("see [[a]] and [a](../drafts/a.md)\n")


async def test_a_rename_inside_the_scope_still_rewrites_every_link(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """With no note outside the scope linking to it, a rename rewrites the links as before."""
    root = tmp_path / "v"
    linked_vault(root)
    (root / "archive" / "ref.md").write_text("# ref\n\nno link\n")
    (root / "private" / "diary.md").write_text("---\nprivate: true\n---\n# diary\n\nno link\n")
    index_vault(conn, add_vault(conn, root, "v"))
    async with mcp_client(db_path, allowlist=("drafts",), **ON) as client:
        r = await client.call_tool("kms_rename", {"noteId": "drafts/a.md", "title": "b"})
        assert not r.is_error, r.structured_content
        assert r.structured_content["linksRewritten"]["notes"] == ["drafts/near.md"]
    assert (root / "drafts" / "near.md").read_text() == "# near\n\nsee [[b]]\n"


async def test_over_stdio_a_move_through_a_portal_and_a_foreign_link_rewrite_are_refused(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    root, outside = tmp_path / "v", tmp_path / "outside"
    portal_vault(root, outside)
    (root / "archive" / "ref.md").write_text("# ref\n\nsee [[a]]\n")
    index_vault(conn, add_vault(conn, root, "v"))
    before = tree(root, outside)
    env = {
        "KMS_AGENT_WRITE_TOOLS_ENABLED": "1",
        "KMS_AGENT_EDIT_TOOLS_ENABLED": "1",
        "KMS_AGENT_ORGANIZE_TOOLS_ENABLED": "1",
        "KMS_WRITE_ALLOWLIST": "drafts",
    }
    async with stdio_server(db_path, tmp_path, **env) as client:
        err = refusal(await client.call_tool("kms_move_folder", {"folder": "drafts/sub", "to": "drafts/portal"}))
        assert err["error"] == "folder-denied", err
        err = refusal(await client.call_tool("kms_create", {"title": "New", "folder": "drafts/portal/new"}))
        assert err["error"] == "folder-denied", err
        err = refusal(await client.call_tool("kms_rename", {"noteId": "drafts/a.md", "title": "b"}))
        assert (err["error"], err["notesOutsideScope"]) == ("folder-denied", 1), err
    assert tree(root, outside) == before
