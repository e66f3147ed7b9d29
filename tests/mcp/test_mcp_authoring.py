"""S003's authoring rules through a real MCP client: kms_create takes its title from a leading # H1, and
kms_edit replaces the whole body only under the version it was read at."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from support.mcp_session import TierSwitches, mcp_client
from support.organize import assert_index_is_fresh, index, make_vault
from support.vaults import write

from server.index.note_data import unfence

EDIT: TierSwitches = {"write_enabled": True, "edit_enabled": True}
NOTE = (
    "---\ntags: [x]\n---\n<!-- kms:summary hash=abc -->\nsum\n<!-- /kms:summary -->\n# Draft\n\n"
    "first line\nsecond line\n"
)


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    root = make_vault(tmp_path / "v")
    write(root / "drafts/Draft.md", NOTE)
    index(conn, root)
    return root


async def call(client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    return {**result.structured_content, "_error": result.is_error}


async def test_create_takes_its_title_from_a_leading_h1(vault: Path, conn: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path, **EDIT) as client:
        plain = await call(client, "kms_create", {"content": "# Kestrel plan\n\nbody\n", "folder": "drafts"})
        with_fm = await call(client, "kms_create", {"content": "---\nstatus: new\n---\n\n# Closing #\nx\n"})
        given = await call(client, "kms_create", {"title": "Chosen", "content": "# Other\n"})
        none = await call(client, "kms_create", {"content": "no heading here\n# Late\n"})
        h2 = await call(client, "kms_create", {"content": "## Not a title\n"})
    assert not plain["_error"], plain
    assert plain["path"] == "drafts/Kestrel plan.md" and plain["title"] == "Kestrel plan"
    assert (vault / "drafts/Kestrel plan.md").read_text() == "# Kestrel plan\n\nbody\n"
    assert with_fm["path"] == "Closing.md" and given["path"] == "Chosen.md"
    assert none["error"] == "invalid-input" and "# Title" in none["message"] and h2["error"] == "invalid-input"


async def test_edit_replaces_the_whole_body_under_its_version_only(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from server.writes.undo.revert import revert

    async with mcp_client(db_path, **EDIT) as client:
        read = await call(client, "kms_read", {"noteId": "drafts/Draft.md"})
        out = await call(
            client,
            "kms_edit",
            {"noteId": read["noteId"], "version": read["version"], "edits": [{"replaceBody": "# Draft\n\nall new\n"}]},
        )
        stale = await call(
            client,
            "kms_edit",
            {"noteId": read["noteId"], "version": read["version"], "edits": [{"replaceBody": "lost?\n"}]},
        )
        again = await call(client, "kms_read", {"noteId": read["noteId"]})
    assert not out["_error"], out
    text = (vault / "drafts/Draft.md").read_text()
    assert text == NOTE[: NOTE.index("# Draft")] + "# Draft\n\nall new\n"  # frontmatter and summary kept
    assert unfence(again["body"]) == "# Draft\n\nall new\n" and again["version"] == out["version"]
    assert stale["error"] == "conflict" and stale["currentVersion"] == out["version"]
    assert (vault / "drafts/Draft.md").read_text() == text  # the stale call wrote nothing
    assert_index_is_fresh(conn, vault, tmp_path)
    revert(conn, out["invocationId"])
    assert (vault / "drafts/Draft.md").read_text() == NOTE
