"""A new tool is three places: its operation, its spec beside its handler (in its tier's tuple), its test.

The tools here exist nowhere else: an edit-tier ``kms_shout`` over an existing operation and a read-tier
``kms_title_length``. Filed in a registry built the way ``REGISTRY`` is, they are served by the real runner
and server to a real MCP client, listed and gated by their tier, documented by the docs generator and
their error kinds checked, with nothing else written for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import apsw
import pytest
from pydantic import BaseModel
from support.mcp_session import mcp_client
from support.vaults import note_id

from server.config.tiers import RULES
from server.mcp.tools import BY_TIER, build_registry
from server.mcp.tools.base import (
    DESTRUCTIVE,
    READ_ONLY,
    Denied,
    NoteIdField,
    ReadSpec,
    StrictInput,
    ToolContext,
    WriteSpec,
)
from server.mcp.tools.docs import tools_markdown
from server.mcp.tools.edit_tools import EDIT_TOOLS
from server.mcp.tools.notes_tools import note_id_of
from server.mcp.tools.read_tools import READ_TOOLS
from server.mcp.tools.write_tools import WriteOutput
from server.writes.context import WriteContext
from server.writes.outcome import WriteOutcome


class ShoutInput(StrictInput):
    noteId: str = NoteIdField


def kms_shout(ctx: WriteContext, args: ShoutInput) -> WriteOutcome:
    from server.writes import operations

    note, vault = ctx.note(args.noteId)
    return operations.append(ctx, vault, note, content="SHOUT")


KMS_SHOUT = WriteSpec(
    name="kms_shout",
    tier="edit",
    about="Add a shout to the end of a note. Use it when a test needs a tool of its own.",
    errors=("not-found", "folder-denied"),
    input_model=ShoutInput,
    output_model=WriteOutput,
    handler=kms_shout,
    annotations=DESTRUCTIVE.model_copy(update={"title": "Shout"}),
    example={"noteId": "drafts/append.md"},
    denied=Denied({"noteId": "drafts/sub/append.md"}, "drafts/sub/append.md"),
)


class LengthInput(StrictInput):
    noteId: str = NoteIdField


class LengthOutput(BaseModel):
    noteId: str
    chars: int


def kms_title_length(ctx: ToolContext, args: LengthInput) -> dict[str, Any]:
    ctx.require_index()
    nid = note_id_of(ctx, args.noteId)
    title = cast(str, ctx.conn.execute("SELECT title FROM notes WHERE id = ?", (nid,)).fetchall()[0][0])
    return {"noteId": nid, "chars": len(title)}


KMS_TITLE_LENGTH = ReadSpec(
    name="kms_title_length",
    about="How long a note's title is. Use it when a test needs a read tool of its own.",
    errors=("not-found", "no-index"),
    input_model=LengthInput,
    output_model=LengthOutput,
    handler=kms_title_length,
    annotations=READ_ONLY.model_copy(update={"title": "Title length"}),
    example={"noteId": "drafts/edit.md"},
)

REGISTRY = build_registry({**BY_TIER, "read": (*READ_TOOLS, KMS_TITLE_LENGTH), "edit": (*EDIT_TOOLS, KMS_SHOUT)})


def calls(conn: apsw.Connection) -> list[tuple]:
    return conn.execute("SELECT tool, status, error FROM tool_invocations ORDER BY id").fetchall()


async def test_a_new_edit_tool_is_listed_and_runs_only_when_its_tier_is_on(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    home = note_id(indexed, "Home")
    before = (vault_dir / "Home.md").read_bytes()
    async with mcp_client(db_path, registry=REGISTRY, write_enabled=True) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        off = await client.call_tool("kms_shout", {"noteId": home})
    assert "kms_shout" not in names and "kms_title_length" in names
    assert off.is_error and off.structured_content["error"] == "feature-disabled"
    assert RULES["edit"].env in off.structured_content["message"]  # names the setting that is off
    assert (vault_dir / "Home.md").read_bytes() == before and calls(indexed) == [
        ("kms_shout", "refused", "feature-disabled")
    ]

    async with mcp_client(db_path, registry=REGISTRY, write_enabled=True, edit_enabled=True) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        done = await client.call_tool("kms_shout", {"noteId": home})
        bad = await client.call_tool("kms_shout", {"noteId": home, "loud": True})
        missing = await client.call_tool("kms_shout", {"noteId": "No such note"})
    names = list(tools)
    assert names[-len(EDIT_TOOLS) - 1 :] == [*(s.name for s in EDIT_TOOLS), "kms_shout"]  # its tuple's place
    assert tools["kms_shout"].description == KMS_SHOUT.description
    assert "Errors: not-found, invalid-input, feature-disabled, rate-limited" in tools["kms_shout"].description
    annotations = tools["kms_shout"].annotations
    assert annotations is not None and annotations.destructive_hint is True
    assert not done.is_error, done.structured_content
    assert (vault_dir / "Home.md").read_bytes().rstrip().endswith(b"SHOUT")
    assert bad.structured_content["error"] == "invalid-input" and missing.structured_content["error"] == "not-found"
    assert calls(indexed)[1:] == [
        ("kms_shout", "success", None),
        ("kms_shout", "error", "invalid-input"),
        ("kms_shout", "error", "not-found"),
    ]


async def test_a_new_read_tool_is_listed_always_and_gated_by_the_read_tier(
    indexed: apsw.Connection, db_path: Path
) -> None:
    async with mcp_client(db_path, registry=REGISTRY) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        answer = await client.call_tool("kms_title_length", {"noteId": "Home"})
    assert names == [s.name for s in (*READ_TOOLS, KMS_TITLE_LENGTH)]  # writes are off
    assert not answer.is_error and answer.structured_content == {"noteId": note_id(indexed, "Home"), "chars": 4}
    async with mcp_client(db_path, registry=REGISTRY, read_enabled=False) as client:
        assert "kms_title_length" in [t.name for t in (await client.list_tools()).tools]
        off = await client.call_tool("kms_title_length", {"noteId": "Home"})
    assert off.structured_content["error"] == "feature-disabled" and "agent.read" in off.structured_content["message"]


def test_the_docs_generator_documents_a_new_tool_under_its_tier() -> None:
    doc = tools_markdown(REGISTRY)
    assert "| `kms_shout` | edit | False | True | False |" in doc
    assert f"## `kms_shout`\n\n{KMS_SHOUT.description}\n" in doc and "| `noteId` | string | yes |" in doc
    assert "## `kms_title_length`" in doc
    assert "kms_shout" not in tools_markdown()  # the real reference has only the real tools


def test_a_new_tools_error_kinds_and_tier_are_checked() -> None:
    with pytest.raises(ValueError, match="kms_shout.*'shouted-too-loud'"):
        WriteSpec(
            name="kms_shout",
            tier="edit",
            about="x",
            errors=("not-found", "shouted-too-loud"),
            input_model=ShoutInput,
            output_model=WriteOutput,
            handler=kms_shout,
            annotations=DESTRUCTIVE,
            example={"noteId": "drafts/append.md"},
            denied="a test",
        )
    with pytest.raises(ValueError, match="kms_shout: a WriteSpec is of tier write or edit or organize, not 'read'"):
        WriteSpec(
            name="kms_shout",
            tier="read",  # type: ignore[arg-type]  # the wrong tier, on purpose
            about="x",
            input_model=ShoutInput,
            output_model=WriteOutput,
            handler=kms_shout,
            annotations=DESTRUCTIVE,
            example={"noteId": "drafts/append.md"},
            denied="a test",
        )
    with pytest.raises(ValueError, match="kms_shout filed under the write tier"):
        build_registry({**BY_TIER, "write": (*BY_TIER["write"], KMS_SHOUT)})
    with pytest.raises(ValueError, match="used twice"):
        build_registry({**BY_TIER, "edit": (*EDIT_TOOLS, KMS_SHOUT, KMS_SHOUT)})
