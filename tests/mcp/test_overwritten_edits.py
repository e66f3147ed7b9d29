"""``overwritten`` for an agent's edits and property changes, not only for inserted text: a person's
later save from an older buffer that drops a ``kms_edit`` (a replacement, a section, a prepend, a
deletion) or a property change flags the call; a save that keeps the change does not; putting the
agent's version back clears the flag. The watcher's real re-index drives it (``apply_changes``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.mcp_session import mcp_client
from support.sql import value

from server.activity import overwrites
from server.activity.feed import overwritten_ids
from server.index.indexer import index_vault
from server.index.watcher import apply_changes
from server.vault.registry import add_vault, list_vaults

NOTE = (
    "---\nstatus: draft\nowner: ana\n---\n# Plan\n\nintro line\n\n## Risks\n\nold risk one\nold risk two\n\n"
    "## Steps\n\nstep A\nstep B\n"
)

CALLS: dict[str, tuple[str, dict[str, Any]]] = {  # name: (tool, arguments without noteId/version)
    "replace": ("kms_edit", {"edits": [{"replace": {"old": "step A", "new": "step A, done"}}]}),
    "section": ("kms_edit", {"edits": [{"replaceSection": {"heading": "Risks", "content": "no risk left\n"}}]}),
    "prepend": ("kms_edit", {"edits": [{"prepend": "a summary the agent wrote"}]}),
    "delete": ("kms_edit", {"edits": [{"replace": {"old": "step B\n", "new": ""}}]}),
    "property": ("kms_update_properties", {"set": {"status": "done"}, "remove": ["owner"]}),
    "link": ("kms_link", {"target": "Roadmap"}),
}


def rename_save(path: Path, text: str) -> None:
    """What most editors do: write a temp file beside the note, rename it over the note."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def seen(conn: apsw.Connection, root: Path, *paths: Path) -> None:
    """The watcher's pass over these saves (the real re-index, then the overwritten check)."""
    apply_changes(conn, list_vaults(conn), {str(p) for p in paths}, after=overwrites.check)


def flagged(conn: apsw.Connection, invocation_id: int) -> bool:
    return value(conn, "SELECT overwritten_at FROM tool_invocations WHERE id = ?", (invocation_id,)) is not None


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    for name in CALLS:
        (root / f"{name}.md").write_text(NOTE, encoding="utf-8")
        (root / f"{name} kept.md").write_text(NOTE, encoding="utf-8")
    index_vault(conn, add_vault(conn, root, "v"))
    return root


async def test_a_save_that_drops_an_edit_or_a_property_change_is_flagged(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    ids: dict[str, int] = {}
    after: dict[str, str] = {}
    async with mcp_client(
        db_path, write_enabled=True, edit_enabled=True, organize_enabled=True, per_minute=100
    ) as client:
        for name, (tool, args) in CALLS.items():
            for stem in (name, f"{name} kept"):
                nid = value(conn, "SELECT id FROM notes WHERE path = ?", (f"{stem}.md",))
                read = (await client.call_tool("kms_read", {"noteId": nid})).structured_content
                extra = {"version": read["version"]} if tool == "kms_edit" else {}
                r = await client.call_tool(tool, {"noteId": nid, **args, **extra})
                assert not r.is_error, (name, r.structured_content)
                ids[stem] = r.structured_content["invocationId"]
                after[stem] = (vault / f"{stem}.md").read_text(encoding="utf-8")
    assert after["delete"].count("step B") == 0 and "status: done" in after["property"]

    for name in CALLS:  # the person's editor still holds the note from before the agent's call
        rename_save(vault / f"{name}.md", NOTE + "\na line the person added\n")
        # ... or the person reloaded it first: their save keeps the agent's change
        rename_save(vault / f"{name} kept.md", after[f"{name} kept"] + "\na line the person added\n")
    seen(conn, vault, *(vault / f"{stem}.md" for stem in ids))
    assert overwritten_ids(conn) == {ids[name] for name in CALLS}

    for name in CALLS:  # the person undoes their save: the agent's change is back, the flag goes
        rename_save(vault / f"{name}.md", after[name])
    seen(conn, vault, *(vault / f"{name}.md" for name in CALLS))
    assert overwritten_ids(conn) == set()


async def test_an_edit_whose_lines_a_person_changed_later_is_flagged_but_not_one_beside_it(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    """The edit is judged by the whole lines it wrote: the person rewriting those lines drops it; the
    person editing another line of the note does not."""
    path = vault / "replace.md"
    async with mcp_client(db_path, write_enabled=True, edit_enabled=True) as client:
        nid = value(conn, "SELECT id FROM notes WHERE path = 'replace.md'")
        version = (await client.call_tool("kms_read", {"noteId": nid})).structured_content["version"]
        r = await client.call_tool(
            "kms_edit", {"noteId": nid, "version": version, "edits": [{"replace": {"old": "step A", "new": "step A2"}}]}
        )
        assert not r.is_error, r.structured_content
        inv = r.structured_content["invocationId"]
    text = path.read_text(encoding="utf-8")
    rename_save(path, text.replace("intro line", "the intro, reworded"))
    seen(conn, vault, path)
    assert not flagged(conn, inv)
    rename_save(path, text.replace("step A2\n", "step A\n"))  # an old buffer: "step A" is a prefix, not the line
    seen(conn, vault, path)
    assert flagged(conn, inv)
