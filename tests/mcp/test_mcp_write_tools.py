"""The write tools through a real MCP client: gate, listing, annotations, errors, provenance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
from support.mcp_session import mcp_client
from support.sql import tuples, value
from support.vaults import note_id

from server.mcp.tools import REGISTRY, tool_names

WRITE_TOOLS = set(tool_names("write"))
ABOVE_READ = {s.name for s in REGISTRY if s.tier != "read"}  # write, edit, organize
IDEMPOTENT = {"kms_update_properties", "kms_link"}  # adding what is already there changes nothing
DELETES = {"kms_update_properties"}  # remove deletes keys: a host should not auto-approve it


def provenance(conn: apsw.Connection) -> list[tuple]:
    return conn.execute("SELECT tool, status, error FROM tool_invocations ORDER BY id").fetchall()


async def test_write_tools_hidden_from_listing_when_writes_off(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path, write_enabled=False) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert not names & ABOVE_READ
        result = await client.call_tool("kms_append", {"noteId": note_id(indexed, "Home"), "content": "x"})
        assert result.is_error and result.structured_content["error"] == "feature-disabled"
    assert provenance(indexed) == [("kms_append", "refused", "feature-disabled")]


async def test_each_flag_gates_writes_independently(indexed: apsw.Connection, db_path: Path) -> None:
    for off in ("enabled", "read_enabled", "write_enabled"):
        flags: dict[str, Any] = {"enabled": True, "read_enabled": True, "write_enabled": True, off: False}
        async with mcp_client(db_path, **flags) as client:
            result = await client.call_tool("kms_create", {"title": f"t {off}", "folder": "drafts"})
            assert result.structured_content["error"] == "feature-disabled", off


async def test_annotations_of_write_tools(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path, write_enabled=True) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert WRITE_TOOLS <= set(tools) and not set(tools) & (ABOVE_READ - WRITE_TOOLS)  # edit and organize are off
    for name in WRITE_TOOLS:
        a = tools[name].annotations
        assert a is not None
        assert a.read_only_hint is False and a.open_world_hint is False
        assert a.destructive_hint is (name in DELETES), name
        assert a.idempotent_hint is (name in IDEMPOTENT)


async def test_create_append_insert_update_land_in_the_file(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    async with mcp_client(db_path, write_enabled=True, allowlist=("drafts",)) as client:
        created = await client.call_tool(
            "kms_create", {"title": "Plan: v2/next", "folder": "drafts", "content": "# Plan\n\nfirst", "tags": ["plan"]}
        )
        assert not created.is_error, created.structured_content
        c = created.structured_content
        assert c["path"] == "drafts/Plan- v2-next.md" and c["bytesBefore"] == 0 and c["bytesAfter"] > 0
        nid = c["noteId"]
        appended = (await client.call_tool("kms_append", {"noteId": nid, "content": "second"})).structured_content
        assert appended["linesAdded"] >= 1 and appended["bytesAfter"] > appended["bytesBefore"]
        inserted = await client.call_tool(
            "kms_insert_at", {"noteId": nid, "content": "zero", "position": {"beforeHeading": "Plan"}}
        )
        assert not inserted.is_error, inserted.structured_content
        props = await client.call_tool("kms_update_properties", {"noteId": nid, "set": {"status": "draft"}})
        assert not props.is_error, props.structured_content
        read = (await client.call_tool("kms_read", {"noteId": nid})).structured_content
    text = (vault_dir / "drafts" / "Plan- v2-next.md").read_text()
    assert "status: draft" in text and text.index("zero") < text.index("# Plan") < text.index("second")
    assert read["frontmatter"]["status"] == "draft" and "plan" in read["tags"]
    assert [s for _t, s, _e in provenance(indexed)] == ["success"] * 4


async def test_error_kinds_come_back_typed_and_recorded(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    home, draft = note_id(indexed, "Home"), note_id(indexed, "Indexing notes for coding agents")
    before = (vault_dir / "Home.md").read_bytes()
    async with mcp_client(db_path, write_enabled=True, allowlist=("drafts",), per_minute=100) as client:

        async def err(tool: str, args: dict) -> str:
            r = await client.call_tool(tool, args)
            assert r.is_error, r.structured_content
            assert r.structured_content["message"]
            return r.structured_content["error"]

        assert await err("kms_append", {"noteId": "nope", "content": "x"}) == "not-found"
        assert await err("kms_append", {"noteId": home, "content": "x"}) == "folder-denied"
        assert await err("kms_create", {"title": "Home", "folder": "projects"}) == "folder-denied"
        assert await err("kms_create", {"title": "x", "tags": ["#bad"]}) == "invalid-input"
        assert await err("kms_create", {"title": "x", "content": "y" * 100_001}) == "invalid-input"
        assert await err("kms_update_properties", {"noteId": home, "set": {"kms_provenance": "x"}}) == "invalid-input"
        assert await err("kms_update_properties", {"noteId": home, "set": {"private": True}}) == "folder-denied"
        assert await err("kms_link", {"noteId": home, "target": "Elsewhere"}) == "folder-denied"
        assert await err("kms_update_properties", {"noteId": draft, "set": {"a": 1}, "version": "0" * 64}) == "conflict"
        assert (
            await err("kms_insert_at", {"noteId": home, "content": "x", "position": {"afterHeading": "x", "atLine": 1}})
            == "invalid-input"
        )
        assert (
            await err("kms_create", {"title": "Indexing notes for coding agents", "folder": "drafts"})
            == "already-exists"
        )
    assert (vault_dir / "Home.md").read_bytes() == before
    statuses = [s for _t, s, _e in provenance(indexed)]
    assert len(statuses) == 11 and "success" not in statuses


async def test_rate_limit_is_per_session_and_counted(indexed: apsw.Connection, db_path: Path) -> None:
    nid = note_id(indexed, "Indexing notes for coding agents")
    async with mcp_client(db_path, write_enabled=True, per_minute=3, session_id="s-flood") as client:
        results = [await client.call_tool("kms_append", {"noteId": nid, "content": f"line {i}"}) for i in range(5)]
    errors = [r.structured_content.get("error") for r in results]
    assert errors == [None, None, None, "rate-limited", "rate-limited"]
    assert results[3].structured_content["retryAfterMs"] > 0
    row = indexed.execute("SELECT window_count, total, per_minute FROM write_counters WHERE session_id = 's-flood'")
    assert row.fetchall() == [(3, 3, 3)]


def two_vaults(conn: apsw.Connection, tmp_path: Path) -> dict[str, str]:
    """Vaults "a" and "b", each with one note; title -> noteId."""
    from server.index.indexer import index_vault
    from server.vault.registry import add_vault

    for name in ("a", "b"):
        root = tmp_path / f"vault-{name}"
        (root / "drafts").mkdir(parents=True)
        (root / "drafts" / f"Note {name}.md").write_text(f"# Note {name}\n\nbody {name}\n")
        index_vault(conn, add_vault(conn, root, name))
    return {name: note_id(conn, f"Note {name}") for name in ("a", "b")}


async def test_a_session_scoped_to_one_vault_never_writes_another(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    ids = two_vaults(conn, tmp_path)
    b_file = tmp_path / "vault-b" / "drafts" / "Note b.md"
    b_before = b_file.read_bytes()
    async with mcp_client(db_path, write_enabled=True, vault="a") as client:

        async def call(tool: str, args: dict) -> dict:
            return (await client.call_tool(tool, args)).structured_content

        for tool, args in (
            ("kms_append", {"content": "x"}),
            ("kms_insert_at", {"content": "x", "position": {"atLine": 1}}),
            ("kms_update_properties", {"set": {"s": 1}}),
        ):
            out = await call(tool, {"noteId": ids["b"], **args})
            assert out["error"] == "not-found", (tool, out)  # as if the note did not exist
            assert "vault-b" not in out["message"] and "vault" not in out  # nothing about b leaks
        refused = await call("kms_create", {"title": "Sneaky", "folder": "drafts", "vault": "b"})
        assert refused["error"] == "invalid-input" and "'a'" in refused["message"]
        created = await call("kms_create", {"title": "Scoped", "folder": "drafts"})  # two vaults, no `vault`
        assert created["vault"] == "a", created
        assert (await call("kms_append", {"noteId": ids["a"], "content": "in a"}))["vault"] == "a"
    assert b_file.read_bytes() == b_before
    assert not (tmp_path / "vault-b" / "drafts" / "Sneaky.md").exists()
    assert (tmp_path / "vault-a" / "drafts" / "Scoped.md").exists()
    rows = conn.execute("SELECT tool, status, error, vault FROM tool_invocations ORDER BY id").fetchall()
    assert [r[1] for r in rows] == ["error"] * 4 + ["success"] * 2  # every call recorded once
    assert all(r[3] in (None, "a") for r in rows)  # nothing recorded against vault b


async def test_a_scoped_write_by_title_finds_the_note_of_its_own_vault(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """The same title in both vaults: within the scope it names one note, never 'several notes'."""
    from server.index.indexer import index_all

    two_vaults(conn, tmp_path)
    for name in ("a", "b"):
        (tmp_path / f"vault-{name}" / "drafts" / "Shared.md").write_text(f"# Shared\n\nin {name}\n")
    index_all(conn)
    async with mcp_client(db_path, write_enabled=True, vault="b") as client:
        out = (await client.call_tool("kms_append", {"noteId": "Shared", "content": "more"})).structured_content
        assert out.get("error") is None and out["vault"] == "b", out
        missing = (await client.call_tool("kms_append", {"noteId": "Note a", "content": "x"})).structured_content
        assert missing["error"] == "not-found" and "Note a" not in missing.get("suggestions", []), missing
    assert (tmp_path / "vault-b" / "drafts" / "Shared.md").read_text().endswith("more\n")
    assert (tmp_path / "vault-a" / "drafts" / "Shared.md").read_text() == "# Shared\n\nin a\n"


async def test_unscoped_create_with_two_vaults_must_name_one(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    two_vaults(conn, tmp_path)
    async with mcp_client(db_path, write_enabled=True) as client:
        out = (await client.call_tool("kms_create", {"title": "Where", "folder": "drafts"})).structured_content
        assert out["error"] == "invalid-input" and out["vaults"] == ["a", "b"]
        ok = await client.call_tool("kms_create", {"title": "Here", "folder": "drafts", "vault": "b"})
        assert ok.structured_content["vault"] == "b"


async def test_every_write_call_gets_exactly_one_provenance_row(indexed: apsw.Connection, db_path: Path) -> None:
    """Refused at the gate, by the input model, by the rate limit, by the operation, or done: one row each,
    and the answer carries nothing private (no internal flags)."""
    nid = note_id(indexed, "Indexing notes for coding agents")
    async with mcp_client(db_path, write_enabled=False) as client:
        off = (await client.call_tool("kms_append", {"noteId": nid, "content": "x"})).structured_content
    async with mcp_client(db_path, write_enabled=True, per_minute=2, session_id="s-one") as client:
        answers = [off]
        for args in (
            {"noteId": nid},
            {"noteId": nid, "content": "x", "bogus": 1},
            {"noteId": "nope", "content": "x"},
            {"noteId": nid, "content": "one"},
            {"noteId": nid, "content": "two"},
            {"noteId": nid, "content": "three"},
        ):
            answers.append((await client.call_tool("kms_append", args)).structured_content)
    kinds = [a.get("error") for a in answers]
    assert kinds == ["feature-disabled", "invalid-input", "invalid-input", "not-found", None, None, "rate-limited"]
    assert all(not any(k.startswith("_") for k in a) for a in answers)
    rows = indexed.execute("SELECT status, error, change_kind FROM tool_invocations ORDER BY id").fetchall()
    assert [r[1] for r in rows] == kinds
    assert [r[2] for r in rows] == [None] * 4 + ["text-inserted"] * 2 + [None]
    # refusals before the operation gave no slot away: the two writes are all the session used
    assert indexed.execute("SELECT total FROM write_counters WHERE session_id = 's-one'").fetchall() == [(2,)]


def test_a_new_write_tool_is_a_registry_entry_plus_an_operation(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    """A tool defined only here (an entry and an operation, nothing else anywhere) is gated, validated,
    rate-limited, recorded once, shown by the dashboard and reverted like the built-in ones; a bug in
    it is recorded and answered, not raised."""
    from pydantic import Field

    from server.activity import feed
    from server.config.session_contract import SessionConfig
    from server.mcp.tools.base import ADD_ONLY, Denied, StrictInput, WriteSpec
    from server.mcp.tools.dispatch import ToolRunner
    from server.mcp.tools.write_tools import WriteOutput
    from server.writes import operations
    from server.writes.context import WriteContext
    from server.writes.outcome import WriteOutcome
    from server.writes.undo.revert import revert

    class StampInput(StrictInput):
        noteId: str = Field(min_length=1)

    def kms_stamp(ctx: WriteContext, args: StampInput) -> WriteOutcome:
        note, vault = ctx.note(args.noteId)
        if note.title == "Home":
            raise RuntimeError("a bug in the new tool")
        return operations.append(ctx, vault, note, content="stamped")

    spec = WriteSpec(
        name="kms_stamp",
        tier="write",
        about="Stamp a note.",
        input_model=StampInput,
        output_model=WriteOutput,
        handler=kms_stamp,
        annotations=ADD_ONLY,
        example={"noteId": "drafts/edit.md"},
        denied=Denied({"noteId": "drafts/sub/edit.md"}, "drafts/sub/edit.md"),
    )
    nid = note_id(indexed, "Indexing notes for coding agents")
    path = vault_dir / value(indexed, "SELECT path FROM notes WHERE id = ?", (nid,))
    before = path.read_bytes()
    body, trail = before.rstrip(b"\n"), before[len(before.rstrip(b"\n")) :]
    config = SessionConfig.from_env({"KMS_DB_PATH": str(db_path)}, write_enabled=True, per_minute=2)
    runner = ToolRunner(config, registry=[spec])
    try:
        done, is_error = runner.call("kms_stamp", {"noteId": nid})
        assert not is_error and path.read_bytes() == body + b"\n\nstamped" + trail, done
        assert runner.call("kms_stamp", {"noteId": nid, "extra": 1})[0]["error"] == "invalid-input"
        bug, is_error = runner.call("kms_stamp", {"noteId": note_id(indexed, "Home")})
        assert is_error and bug["error"] == "internal"
        runner.call("kms_stamp", {"noteId": nid})
        assert runner.call("kms_stamp", {"noteId": nid})[0]["error"] == "rate-limited"
    finally:
        runner.close()
    rows = indexed.execute("SELECT tool, status, error, change_kind FROM tool_invocations ORDER BY id").fetchall()
    assert rows == [
        ("kms_stamp", "success", None, "text-inserted"),
        ("kms_stamp", "error", "invalid-input", None),
        ("kms_stamp", "error", "internal", None),
        ("kms_stamp", "success", None, "text-inserted"),
        ("kms_stamp", "rate-limited", "rate-limited", None),
    ]
    detail = feed.invocation_detail(indexed, done["invocationId"])
    assert detail is not None and detail.note.state == "present"  # the second stamp went after it
    assert path.read_bytes() == body + b"\n\nstamped\n\nstamped" + trail
    revert(indexed, done["invocationId"])
    assert path.read_bytes() == body + b"\n\nstamped" + trail


async def test_a_refused_call_is_recorded_without_what_it_should_not_keep(
    indexed: apsw.Connection, db_path: Path
) -> None:
    async with mcp_client(db_path, write_enabled=True) as client:
        out = (await client.call_tool("kms_append", {"noteId": "n" * 10_000, "content": "x"})).structured_content
    assert out["error"] == "invalid-input" and "noteId" in out["message"]
    row = tuples(indexed, "SELECT note_id, length(input_summary), status FROM tool_invocations")
    assert row == [(None, row[0][1], "error")] and row[0][1] <= 400


async def test_host_injected_arguments_are_ignored_and_others_still_refused(
    indexed: apsw.Connection, db_path: Path
) -> None:
    """Gemini CLI sends ``wait_for_previous`` with every call: read and write tools accept and ignore it."""
    async with mcp_client(db_path, write_enabled=True) as client:
        found = await client.call_tool("kms_search", {"query": "auth", "wait_for_previous": True})
        assert not found.is_error, found.structured_content
        appended = await client.call_tool(
            "kms_append", {"noteId": note_id(indexed, "Home"), "content": "x", "wait_for_previous": False}
        )
        assert not appended.is_error, appended.structured_content
        for tool, args in (
            ("kms_search", {"query": "auth", "wait_for_prev": True}),
            ("kms_append", {"noteId": note_id(indexed, "Home"), "content": "y", "extra": 1}),
        ):
            refused = await client.call_tool(tool, args)
            assert refused.is_error and refused.structured_content["error"] == "invalid-input", tool
    assert "\ny\n" not in (
        Path(
            value(
                indexed,
                "SELECT v.root || '/' || n.path FROM notes n JOIN vaults v ON v.id = n.vault_id WHERE n.title = 'Home'",
            )
        ).read_text()
    )
