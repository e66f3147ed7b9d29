"""``write.allowlist`` as its example says (issue 29), through every write tool of the registry: with
``drafts/*`` (the notes directly in drafts/) and ``inbox`` (inbox/ and below), each tool writes a note
where the entries allow it and is refused ``folder-denied`` one folder deeper, naming the entry that
would allow it, with the file untouched."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
from support.mcp_session import mcp_client
from support.sql import pairs

from server.index.indexer import index_vault
from server.mcp.tools import REGISTRY
from server.vault.registry import add_vault

ALLOW = ("drafts/*", "inbox")
ON: dict[str, Any] = {"write_enabled": True, "edit_enabled": True, "organize_enabled": True, "per_minute": 1000}
EXEMPT = {
    "kms_remember": "the memory folder is its own entry",
    "kms_capture": "the capture folder is its own entry (capture.folder), as the memory folder is kms_remember's",
}

# each write tool: (arguments that write where the allowlist allows, arguments one folder too deep, the path
# the refusal names); a noteId is a vault-relative path, read by the tool's own resolver
Args = Callable[[dict[str, str]], dict[str, Any]]
CASES: dict[str, tuple[Args, Args, str]] = {
    "kms_create": (
        lambda v: {"title": "Made", "folder": "drafts"},
        lambda v: {"title": "Made", "folder": "drafts/sub"},
        "drafts/sub/Made.md",
    ),
    "kms_append": (
        lambda v: {"noteId": "drafts/append.md", "content": "more"},
        lambda v: {"noteId": "drafts/sub/append.md", "content": "more"},
        "drafts/sub/append.md",
    ),
    "kms_insert_at": (
        lambda v: {"noteId": "drafts/insert.md", "content": "top", "position": {"atLine": 1}},
        lambda v: {"noteId": "drafts/sub/insert.md", "content": "top", "position": {"atLine": 1}},
        "drafts/sub/insert.md",
    ),
    "kms_create_many": (
        lambda v: {"notes": [{"title": "Many", "folder": "drafts"}, {"title": "Deep", "folder": "inbox/a/b"}]},
        lambda v: {"notes": [{"title": "Many", "folder": "drafts/sub"}]},
        "drafts/sub/Many.md",
    ),
    "kms_edit": (
        lambda v: {"noteId": "drafts/edit.md", "version": v["drafts/edit.md"], "edits": [{"prepend": "x"}]},
        lambda v: {"noteId": "drafts/sub/edit.md", "version": v["drafts/sub/edit.md"], "edits": [{"prepend": "x"}]},
        "drafts/sub/edit.md",
    ),
    "kms_move": (
        lambda v: {"noteId": "drafts/move.md", "folder": "inbox/later"},
        lambda v: {"noteId": "drafts/move2.md", "folder": "drafts/sub"},  # the target is refused
        "drafts/sub/move2.md",
    ),
    "kms_rename": (
        lambda v: {"noteId": "drafts/rename.md", "title": "Renamed"},
        lambda v: {"noteId": "drafts/sub/rename.md", "title": "Renamed"},
        "drafts/sub/rename.md",
    ),
    "kms_trash": (
        lambda v: {"noteId": "drafts/trash.md"},
        lambda v: {"noteId": "drafts/sub/trash.md"},
        "drafts/sub/trash.md",
    ),
    "kms_update_properties": (  # frontmatter holds the privacy key and aliases: no exemption
        lambda v: {"noteId": "drafts/edit.md", "set": {"s": "x"}},
        lambda v: {"noteId": "drafts/sub/edit.md", "remove": ["aliases"]},
        "drafts/sub/edit.md",
    ),
    "kms_link": (
        lambda v: {"noteId": "drafts/edit.md", "target": "Elsewhere"},
        lambda v: {"noteId": "drafts/sub/edit.md", "targets": ["Elsewhere", "Other"]},
        "drafts/sub/edit.md",
    ),
    "kms_move_folder": (
        lambda v: {"folder": "inbox/a", "to": "inbox/c"},
        lambda v: {"folder": "inbox/x", "to": "drafts"},  # drafts/x/ is below what drafts/* allows
        "drafts/x/n.md",
    ),
    "kms_rename_folder": (
        lambda v: {"folder": "inbox/c", "name": "d"},
        lambda v: {"folder": "drafts/sub", "name": "other"},
        "drafts/sub/append.md",
    ),
}


def write_vault(root: Path) -> None:
    names = ("append", "insert", "edit", "rename", "trash")
    for folder in ("drafts", "drafts/sub"):
        (root / folder).mkdir(parents=True, exist_ok=True)
        for name in names:
            (root / folder / f"{name}.md").write_text(f"# {name}\n\nbody of {folder}/{name}\n")
    (root / "drafts" / "move.md").write_text("# move\n")
    (root / "drafts" / "move2.md").write_text("# move2\n")
    (root / "inbox" / "a").mkdir(parents=True)
    (root / "inbox" / "a" / "n.md").write_text("# in a\n")
    (root / "inbox" / "x").mkdir(parents=True)
    (root / "inbox" / "x" / "n.md").write_text("# in x\n")


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.md"))}


async def test_every_write_tool_follows_the_allowlist_over_note_paths(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    root = tmp_path / "v"
    write_vault(root)
    index_vault(conn, add_vault(conn, root, "v"))
    writers = {s.name for s in REGISTRY if s.tier != "read"}
    assert writers == set(CASES) | set(EXEMPT), "a write tool without an allowlist case"
    versions = pairs(conn, "SELECT path, content_hash FROM notes")
    async with mcp_client(db_path, allowlist=ALLOW, **ON) as client:
        for tool, (_ok, denied, path) in CASES.items():
            before = snapshot(root)
            r = await client.call_tool(tool, denied(versions))
            refusal = r.structured_content if r.is_error else (r.structured_content.get("results") or [{}])[0]
            assert refusal.get("error") == "folder-denied", (tool, r.structured_content)
            assert refusal["wouldAllow"] == path.rpartition("/")[0] + "/*", (tool, refusal)
            assert "drafts/* (the notes directly in drafts/)" in refusal["message"], tool
            assert snapshot(root) == before, tool
        for tool, (ok, _denied, _path) in CASES.items():
            r = await client.call_tool(tool, ok(versions))
            assert not r.is_error, (tool, r.structured_content)
    assert (root / "drafts" / "Made.md").exists() and (root / "inbox" / "later" / "move.md").exists()
    assert (root / "inbox" / "d" / "a" / "b" / "Deep.md").exists()  # created, then moved with inbox/a
    assert (root / "drafts" / "Renamed.md").exists() and not (root / "drafts" / "trash.md").exists()
