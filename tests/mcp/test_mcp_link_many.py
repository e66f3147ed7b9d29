"""kms_link through a real MCP client: several targets in one write, each reported; a target in another
vault refused (the issue's ``[[small:projects/...]]`` written into a ``sample`` note)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest
from support.mcp_session import mcp_client
from support.vaults import write

from server.index.indexer import index_vault
from server.vault.registry import add_vault, get_vault


@pytest.fixture
def two_vaults(conn: apsw.Connection, tmp_path: Path) -> Path:
    a, b = tmp_path / "vault-a", tmp_path / "vault-b"
    write(a / "Alpha.md", "# Alpha\n\nThe first note.\n")
    write(a / "Common.md", "# Common\n\nShared name.\n")
    write(b / "Beta.md", "# Beta\n\nIn vault b.\n")
    for root, name in ((a, "a"), (b, "b")):
        index_vault(conn, add_vault(conn, root, name))
    return a


async def call(client: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    return {**result.structured_content, "_error": bool(result.is_error)}


async def test_several_targets_in_one_write_each_reported_and_reverted(
    two_vaults: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from server.writes.undo.revert import revert

    before = (two_vaults / "Alpha.md").read_bytes()
    targets = [
        "Common",
        "[[Not Yet]]",
        "a:Common",
        "b:Beta",
        "dendron://b/Beta",
        "x|y",
        "nosuch:Thing",
        "Meeting: notes",
    ]
    async with mcp_client(db_path, write_enabled=True, vault="a") as client:
        out = await call(client, "kms_link", {"noteId": "Alpha", "targets": targets})
        both = await call(client, "kms_link", {"noteId": "Alpha", "target": "X", "targets": ["Y"]})
        neither = await call(client, "kms_link", {"noteId": "Alpha"})
    assert not out["_error"] and out["changed"] is True, out
    assert out["added"] == ["[[Common]]", "[[Not Yet]]", "[[Meeting: notes]]"]
    got = {r["target"]: (r.get("added"), r.get("error")) for r in out["results"]}
    assert got == {
        "Common": (True, None),
        "[[Not Yet]]": (True, None),
        "a:Common": (False, None),
        "b:Beta": (None, "invalid-input"),
        "dendron://b/Beta": (None, "invalid-input"),
        "x|y": (None, "invalid-input"),
        "nosuch:Thing": (None, "invalid-input"),
        "Meeting: notes": (True, None),
    }
    assert out["failed"] == 4
    refusals = {r["target"]: r["message"] for r in out["results"] if r.get("error")}
    assert refusals["b:Beta"].replace("b:Beta", "T").replace("'b'", "V") == refusals["nosuch:Thing"].replace(
        "nosuch:Thing", "T"
    ).replace("'nosuch'", "V")  # existence not told
    assert both["error"] == "invalid-input" and neither["error"] == "invalid-input"
    text = (two_vaults / "Alpha.md").read_text()
    assert text.startswith("---\nrelated:\n  - '[[Common]]'\n  - '[[Not Yet]]'\n  - '[[Meeting: notes]]'\n---\n")
    assert "Beta" not in text
    revert(conn, out["invocationId"])
    assert (two_vaults / "Alpha.md").read_bytes() == before


async def test_a_target_in_another_vault_is_refused_and_nothing_written(
    two_vaults: Path, conn: apsw.Connection, db_path: Path
) -> None:
    before = (two_vaults / "Alpha.md").read_bytes()
    async with mcp_client(db_path, write_enabled=True, vault="a") as client:
        scoped = await call(client, "kms_link", {"noteId": "Alpha", "target": "b:Beta"})
    async with mcp_client(db_path, write_enabled=True) as client:
        unscoped = await call(client, "kms_link", {"noteId": "a:Alpha.md", "target": "[[dendron://b/Beta]]"})
        colon = await call(client, "kms_link", {"noteId": "a:Alpha.md", "target": "nosuch:Thing"})
    assert scoped["error"] == "invalid-input" and "stays in its note's vault ('a')" in scoped["message"]
    assert unscoped["error"] == "invalid-input"
    assert not colon["_error"] and colon["added"] == ["[[nosuch:Thing]]"]  # no such vault: a title
    assert (two_vaults / "Alpha.md").read_bytes() != before
    assert conn.execute("SELECT count(*) FROM tool_invocations WHERE error = 'invalid-input'").fetchall() == [(2,)]


async def test_a_property_keeps_its_type_and_names_never_get_links(
    two_vaults: Path, conn: apsw.Connection, db_path: Path
) -> None:
    """A text property stays a text (refused, unless it already is the link), a list grows, and ``tags`` /
    ``aliases`` never receive a link (the dogfood run's ``status: [evergreen, '[[Hub]]']`` and tag ``[[hub]]``)."""
    note = two_vaults / "Note.md"
    note.write_text("---\nstatus: evergreen\nup: '[[Hub]]'\ntags: [project]\naliases: [N]\nrelated: [x]\n---\n# Note\n")
    index_vault(conn, get_vault(conn, "a"))
    before = note.read_bytes()
    async with mcp_client(db_path, write_enabled=True, vault="a") as client:
        status = await call(client, "kms_link", {"noteId": "Note", "target": "Hub", "property": "status"})
        tags = await call(client, "kms_link", {"noteId": "Note", "target": "Hub", "property": "tags"})
        aliases = await call(client, "kms_link", {"noteId": "Note", "targets": ["Hub"], "property": "Aliases"})
        up_same = await call(client, "kms_link", {"noteId": "Note", "target": "Hub", "property": "up"})
        up_other = await call(client, "kms_link", {"noteId": "Note", "target": "Other", "property": "up"})
        assert note.read_bytes() == before
        related = await call(client, "kms_link", {"noteId": "Note", "target": "Hub", "property": "related"})
        listed = await call(client, "kms_list_tags", {})
    for refused in (status, tags, aliases, up_other):
        assert refused["_error"] and refused["error"] == "invalid-input", refused
    assert "one value" in status["message"] and "holds names" in tags["message"]
    assert not up_same["_error"] and up_same["changed"] is False, up_same
    assert not related["_error"] and related["added"] == ["[[Hub]]"], related
    text = note.read_text()
    assert "status: evergreen\n" in text and "tags: [project]\n" in text and "up: '[[Hub]]'\n" in text
    assert "[[" not in str(listed), listed
