"""kms_edit and the tiers through a real MCP client: exact replace, sections, prepend, all or nothing, revert."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from support.mcp_session import TierSwitches, mcp_client
from support.organize import assert_index_is_fresh, index, make_vault, vault_bytes
from support.vaults import note_id, write

from server.config.tiers import RULES
from server.mcp.tools import REGISTRY, tool_names

EDIT: TierSwitches = {"write_enabled": True, "edit_enabled": True}
EDITS = set(tool_names("edit"))
ORGANIZE = set(tool_names("organize"))
NOTE = (
    "---\ntags: [x]\n---\n<!-- kms:summary hash=abc -->\nsum\n<!-- /kms:summary -->\n# Draft\n\n"
    "first line\nsecond line\n\n## Tasks\n\n- one\n- two\n\n### Sub\n\nsub text\n\n## Done\n\nold\n"
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


async def version(client, nid: str) -> str:
    return (await call(client, "kms_read", {"noteId": nid}))["version"]


@pytest.mark.parametrize(
    "tiers, listed",
    [
        ({"write_enabled": True}, set()),
        (EDIT, EDITS),
        ({**EDIT, "organize_enabled": True}, EDITS | ORGANIZE),
        ({"write_enabled": False, "edit_enabled": True, "organize_enabled": True}, set()),  # each needs all below
    ],
)
async def test_a_tier_lists_its_tools_only_when_it_and_every_tier_below_are_on(
    vault: Path, conn: apsw.Connection, db_path: Path, tiers: dict, listed: set
) -> None:
    async with mcp_client(db_path, **tiers) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) & (EDITS | ORGANIZE) == listed
        for name in (EDITS | ORGANIZE) - listed:
            out = await call(
                client,
                name,
                {
                    "noteId": note_id(conn, "Draft"),
                    "title": "x",
                    "folder": "x",
                    "version": "0" * 64,
                    "edits": [{"prepend": "x"}],
                },
            )
            assert out["error"] == "feature-disabled", (name, out)
            tier = next(s.tier for s in REGISTRY if s.name == name)
            assert RULES[tier].env in out["message"] or RULES["write"].env in out["message"]
    for name in listed:
        a = tools[name].annotations
        assert a is not None
        assert a.destructive_hint is True and a.read_only_hint is False
        assert "$ref" not in str(tools[name].input_schema)


async def test_edit_replaces_exactly_once_sections_and_prepends_with_blast_radius(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    nid = note_id(conn, "Draft")
    async with mcp_client(db_path, **EDIT) as client:
        v = await version(client, nid)
        out = await call(
            client,
            "kms_edit",
            {
                "noteId": nid,
                "version": v,
                "edits": [
                    {"replace": {"old": "second line", "new": "2nd line"}},
                    {"replace": {"old": "first line\n", "new": ""}},
                    {"replaceSection": {"heading": "## Tasks", "content": "- only\n"}},
                    {"prepend": "> note"},
                ],
            },
        )
        assert not out["_error"], out
        again = await call(client, "kms_read", {"noteId": nid})
    text = (vault / "drafts/Draft.md").read_text()
    assert text == (
        "---\ntags: [x]\n---\n<!-- kms:summary hash=abc -->\nsum\n<!-- /kms:summary -->\n> note\n\n"
        "# Draft\n\n2nd line\n\n## Tasks\n\n- only\n\n## Done\n\nold\n"
    )
    assert out["version"] == again["version"] != v
    assert out["linesRemoved"] == 8 and out["linesAdded"] == 4
    assert out["bytesBefore"] == len(NOTE) and out["bytesAfter"] == len(text)
    assert [e["line"] for e in out["edits"]] == [10, 9, 11, 7]
    assert_index_is_fresh(conn, vault, tmp_path)


async def test_edit_refusals_name_the_problem_and_change_nothing(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    nid = note_id(conn, "Draft")
    before = vault_bytes(vault)
    async with mcp_client(db_path, **EDIT) as client:
        v = await version(client, nid)
        twice = await call(
            client,
            "kms_edit",
            {
                "noteId": nid,
                "version": v,
                "edits": [{"replace": {"old": "sub text", "new": "ok"}}, {"replace": {"old": "line", "new": "row"}}],
            },
        )
        absent = await call(
            client, "kms_edit", {"noteId": nid, "version": v, "edits": [{"replace": {"old": "nowhere", "new": ""}}]}
        )
        in_fm = await call(
            client,
            "kms_edit",
            {"noteId": nid, "version": v, "edits": [{"replace": {"old": "tags: [x]", "new": "tags: [y]"}}]},
        )
        stale = await call(client, "kms_edit", {"noteId": nid, "version": "0" * 64, "edits": [{"prepend": "x"}]})
        missing = await call(client, "kms_edit", {"noteId": nid, "edits": [{"prepend": "x"}]})
        two_kinds = await call(
            client,
            "kms_edit",
            {"noteId": nid, "version": v, "edits": [{"prepend": "x", "replace": {"old": "a", "new": "b"}}]},
        )
        no_heading = await call(
            client,
            "kms_edit",
            {"noteId": nid, "version": v, "edits": [{"replaceSection": {"heading": "Nope", "content": ""}}]},
        )
        other = note_id(conn, "Other")
        fm = await call(
            client,
            "kms_edit",
            {"noteId": other, "version": await version(client, other), "edits": [{"prepend": "---\nstatus: x\n---"}]},
        )
    assert twice["error"] == "invalid-input" and twice["count"] == 2 and twice["lines"] == [9, 10]
    assert twice["edit"] == 2 and "2 times" in twice["message"]
    assert absent["count"] == 0 and in_fm["count"] == 0  # frontmatter is not the body
    assert stale["error"] == "conflict" and stale["currentVersion"] == v
    assert missing["error"] == "invalid-input" and "version" in missing["message"]
    assert two_kinds["error"] == "invalid-input" and no_heading["error"] == "invalid-input"
    assert fm["error"] == "invalid-input" and "frontmatter" in fm["message"]
    assert vault_bytes(vault) == before
    rows = conn.execute("SELECT status, error FROM tool_invocations WHERE tool = 'kms_edit'").fetchall()
    assert len(rows) == 8 and all(s != "success" for s, _e in rows)


async def test_edit_respects_the_allowlist_and_hidden_notes(vault: Path, conn: apsw.Connection, db_path: Path) -> None:
    from server.index.notes import set_hidden

    set_hidden(conn, "Other.md", True)
    async with mcp_client(db_path, **EDIT, allowlist=("notes",)) as client:
        v = await version(client, note_id(conn, "Draft"))
        denied = await call(
            client, "kms_edit", {"noteId": note_id(conn, "Draft"), "version": v, "edits": [{"prepend": "x"}]}
        )
        hidden = await call(
            client, "kms_edit", {"noteId": "Other.md", "version": "0" * 64, "edits": [{"prepend": "x"}]}
        )
    assert denied["error"] == "folder-denied" and hidden["error"] == "not-found"


async def test_edit_keeps_crlf_and_bom_and_revert_gives_back_the_bytes(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from server.writes.undo.revert import preview_revert, revert

    raw = b"\xef\xbb\xbf# Win\r\n\r\nkeep this\r\nfix thsi\r\nend\r\n"
    (vault / "drafts/Win.md").write_bytes(raw)
    from server.index.indexer import index_vault
    from server.vault.registry import get_vault

    index_vault(conn, get_vault(conn, "v"))
    nid = note_id(conn, "Win")
    async with mcp_client(db_path, **EDIT) as client:
        v = await version(client, nid)
        out = await call(
            client,
            "kms_edit",
            {
                "noteId": nid,
                "version": v,
                "edits": [{"replace": {"old": "fix thsi\nend", "new": "fixed this\nand more\nend"}}],
            },
        )
    assert not out["_error"], out
    assert (vault / "drafts/Win.md").read_bytes() == (
        b"\xef\xbb\xbf# Win\r\n\r\nkeep this\r\nfixed this\r\nand more\r\nend\r\n"
    )
    plan = preview_revert(conn, out["invocationId"])
    assert plan["canRevert"] and "-fix thsi" in plan["files"][0]["diff"]
    revert(conn, out["invocationId"])
    assert (vault / "drafts/Win.md").read_bytes() == raw
    assert_index_is_fresh(conn, vault, tmp_path)


async def test_link_adds_a_forward_link_once_and_reverts(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from server.writes.undo.revert import revert

    nid = note_id(conn, "Draft")
    before = (vault / "drafts/Draft.md").read_bytes()
    async with mcp_client(db_path, write_enabled=True) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        first = await call(client, "kms_link", {"noteId": nid, "target": "Not Yet"})
        again = await call(client, "kms_link", {"noteId": nid, "target": "[[not yet]]"})
        other = await call(client, "kms_link", {"noteId": nid, "target": "notes/Target", "property": "see"})
        bad = await call(client, "kms_link", {"noteId": nid, "target": "a|b"})
        reserved = await call(client, "kms_link", {"noteId": nid, "target": "X", "property": "kms_provenance"})
    a = listed["kms_link"].annotations
    assert a is not None
    assert a.destructive_hint is False and a.idempotent_hint is True
    assert not first["_error"] and first["changed"] is True, first
    assert again["changed"] is False and not again["_error"]
    assert bad["error"] == "invalid-input" and reserved["error"] == "invalid-input"
    text = (vault / "drafts/Draft.md").read_text()
    assert text.startswith("---\ntags: [x]\nrelated:\n  - '[[Not Yet]]'\nsee:\n  - '[[notes/Target]]'\n---\n"), text
    links = conn.execute(
        "SELECT l.target, d.path FROM links l JOIN notes s ON s.rid = l.src_rid "
        "LEFT JOIN notes d ON d.rid = l.dst_rid WHERE s.path = 'drafts/Draft.md' "
        "AND l.in_frontmatter ORDER BY l.target"
    ).fetchall()
    assert links == [("Not Yet", None), ("notes/Target", "notes/Target.md")]
    assert_index_is_fresh(conn, vault, tmp_path)
    revert(conn, other["invocationId"])
    revert(conn, first["invocationId"])
    assert (vault / "drafts/Draft.md").read_bytes() == before


async def test_create_many_is_best_effort_counts_each_note_and_reverts_as_one(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from server.writes.undo.revert import preview_revert, revert

    before = vault_bytes(vault)
    notes = [
        {"title": "One", "folder": "drafts", "content": "# One\n"},
        {"title": "Draft", "folder": "drafts"},  # exists already
        {"title": "Two", "folder": "private"},  # not allowed
        {"title": "Three", "folder": "drafts", "tags": ["a"]},
        {"title": "Four", "folder": "drafts"},
    ]
    async with mcp_client(db_path, write_enabled=True, allowlist=("drafts",), per_minute=3) as client:
        out = await call(client, "kms_create_many", {"notes": notes})
        assert not out["_error"], out
        limited = await call(client, "kms_create", {"title": "Five", "folder": "drafts"})
    assert [r.get("error") or "ok" for r in out["results"]] == ["ok", "already-exists", "folder-denied", "ok", "ok"]
    assert out["created"] == 3 and out["failed"] == 2
    assert limited["error"] == "rate-limited"  # three notes written took the three slots of the minute
    assert (vault / "drafts/Three.md").read_text() == "---\ntags:\n  - a\n---\n"
    assert_index_is_fresh(conn, vault, tmp_path)
    plan = preview_revert(conn, out["invocationId"])
    assert plan["canRevert"] and [f["path"] for f in plan["files"]] == [
        "drafts/One.md",
        "drafts/Three.md",
        "drafts/Four.md",
    ]
    revert(conn, out["invocationId"])
    assert vault_bytes(vault) == before
    assert_index_is_fresh(conn, vault, tmp_path)


async def test_create_many_over_max_files_per_call_is_too_broad(vault: Path, db_path: Path) -> None:
    before = vault_bytes(vault)
    async with mcp_client(db_path, write_enabled=True, max_files_per_call=2) as client:
        out = await call(client, "kms_create_many", {"notes": [{"title": f"n{i}"} for i in range(3)]})
        over = await call(client, "kms_create_many", {"notes": [{"title": f"n{i}"} for i in range(51)]})
    assert out["error"] == "too-broad" and out["count"] == 3 and out["limit"] == 2
    assert over["error"] == "invalid-input"
    assert vault_bytes(vault) == before
