"""Names of any length (issue 29): a note whose path and title are longer than 64 characters is named
by its path, its title and ``vault:path`` in every tool that takes a ``noteId`` (the set comes from the
registry), and a name past the one documented limit (``MAX_NOTE_NAME_CHARS``) is ``invalid-input``
everywhere alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
from support.examples import example
from support.mcp_session import mcp_client
from support.sql import pairs

from server.index.indexer import index_vault
from server.mcp.tools import REGISTRY
from server.vault.registry import add_vault
from server.writes.limits import MAX_NOTE_NAME_CHARS

FOLDER = "projects/research on indexing markdown vaults for coding agents"
ON: dict[str, Any] = {"write_enabled": True, "edit_enabled": True, "organize_enabled": True, "per_minute": 1000}
NAMED = [s.name for s in REGISTRY if "noteId" in s.input_model.model_fields]
example_of = {s.name: s.example for s in REGISTRY}
# what each tool needs besides the note: the rest of its own example (its spec); an example's version stands
# for the note's current one
EXTRA: dict[str, dict[str, Any]] = {
    s.name: {k: v for k, v in example(s).items() if k not in ("noteId", "version")} for s in REGISTRY
}


def title_of(tool: str, how: str) -> str:
    return f"{tool} {how} meeting notes about moving the database cluster to the new region"


def write_vault(root: Path) -> None:
    (root / FOLDER).mkdir(parents=True)
    for tool in NAMED:
        for how in ("path", "title", "vault-path"):
            (root / FOLDER / f"{title_of(tool, how)}.md").write_text(f"# {title_of(tool, how)}\n\nbody\n")


async def test_every_tool_names_a_long_note_by_path_title_and_vault_path(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    root = tmp_path / "v"
    write_vault(root)
    index_vault(conn, add_vault(conn, root, "v"))
    assert {"kms_read", "kms_get_backlinks", "kms_append", "kms_edit", "kms_trash"} <= set(NAMED)
    versions = pairs(conn, "SELECT path, content_hash FROM notes")
    async with mcp_client(db_path, **ON) as client:
        for tool in NAMED:
            for how in ("path", "title", "vault-path"):
                path = f"{FOLDER}/{title_of(tool, how)}.md"
                name = {"path": path, "title": title_of(tool, how), "vault-path": f"v:{path}"}[how]
                assert len(name) > 64
                args = {"noteId": name, **EXTRA.get(tool, {})}
                if "version" in example_of[tool]:
                    args["version"] = versions[path]
                if "title" in args:  # a new title for each of the three notes
                    args["title"] = f"Renamed by {how} for the record"
                r = await client.call_tool(tool, args)
                assert not r.is_error, (tool, how, r.structured_content)


async def test_a_name_past_the_limit_is_invalid_input_in_every_tool(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "one.md").write_text("# one\n")
    index_vault(conn, add_vault(conn, tmp_path / "v", "v"))
    too_long = "n" * (MAX_NOTE_NAME_CHARS + 1)
    async with mcp_client(db_path, **ON) as client:
        for tool in NAMED:
            args = {"noteId": too_long, **EXTRA.get(tool, {})}
            if "version" in example_of[tool]:
                args["version"] = "0" * 64
            r = await client.call_tool(tool, args)
            assert r.is_error and r.structured_content["error"] == "invalid-input", (tool, r.structured_content)
            assert str(MAX_NOTE_NAME_CHARS) in r.structured_content["message"], tool
            r = await client.call_tool(tool, {**args, "noteId": "n" * MAX_NOTE_NAME_CHARS})
            assert r.structured_content.get("error") == "not-found", (tool, r.structured_content)
