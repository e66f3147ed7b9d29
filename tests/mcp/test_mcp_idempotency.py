"""Idempotent retries of every write tool through a real MCP client: a retry with the same idempotencyKey in
the same session answers the first call's result and writes nothing; the key is the session's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest
from support.examples import UNTOUCHED, example, write_example_vault, writers
from support.mcp_session import TierSwitches, mcp_client
from support.organize import index, vault_bytes
from support.sql import tuples

from server.mcp.tools import REGISTRY, tool_names

ON: TierSwitches = {"write_enabled": True, "edit_enabled": True, "organize_enabled": True}
CASES: dict[str, dict[str, Any]] = {s.name: example(s) for s in writers()}  # each tool's own example
WRITE_TOOLS = [*tool_names("write"), *tool_names("edit"), *tool_names("organize")]


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    root = write_example_vault(tmp_path / "v")
    index(conn, root)
    return root


async def call(client: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    return {**result.structured_content, "_error": bool(result.is_error)}


def test_every_write_tool_is_covered_and_lists_the_key() -> None:
    assert sorted(CASES) == sorted(WRITE_TOOLS)
    for spec in REGISTRY:
        props = spec.input_model.model_json_schema()["properties"]
        assert ("idempotencyKey" in props) == (spec.tier != "read"), spec.name


@pytest.mark.parametrize("tool", WRITE_TOOLS)
async def test_a_retry_with_the_same_key_answers_the_first_result_and_writes_nothing(
    tool: str, vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    args = {**CASES[tool], "idempotencyKey": f"k-{tool}"}
    async with mcp_client(db_path, **ON) as client:
        if "version" in args:  # the example's stands for the note's current version
            args["version"] = (await call(client, "kms_read", {"noteId": args["noteId"]}))["version"]
        first = await call(client, tool, args)
        assert not first["_error"], first
        after = vault_bytes(vault)
        retry = await call(client, tool, args)
        after_retry = vault_bytes(vault)
        other = await call(client, tool, {**args, "idempotencyKey": "k-other"}) if tool == "kms_append" else None
        reused = (
            await call(client, "kms_append", {"noteId": UNTOUCHED, "content": "z", "idempotencyKey": f"k-{tool}"})
            if tool != "kms_append"
            else None
        )
    assert not retry["_error"], retry
    assert retry.pop("replayed") is True
    assert retry == first  # the first call's answer, its invocationId included
    assert after_retry == after  # the retry wrote nothing
    rows = tuples(conn, "SELECT tool, status, message FROM tool_invocations WHERE tool = ? ORDER BY id", (tool,))
    assert rows[1][1] == "success" and f"a retry of #{first['invocationId']}" in rows[1][2]
    if other is not None:  # a new key is a new call
        assert not other["_error"] and other["invocationId"] != first["invocationId"]
        assert (vault / args["noteId"]).read_text().count(args["content"]) == 2
    if reused is not None:  # the same key for another call is refused, nothing written
        assert reused["error"] == "invalid-input" and "used for another call" in reused["message"]
        assert vault_bytes(vault) == after


async def test_keys_are_per_session_and_a_failed_call_can_be_retried(
    vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    args = {"noteId": "drafts/append.md", "content": "once", "idempotencyKey": "same"}
    async with mcp_client(db_path, **ON) as client:
        failed = await call(client, "kms_append", {**args, "version": "0" * 64})
        first = await call(client, "kms_append", args)  # the failed call kept no answer: this one runs
    async with mcp_client(db_path, **ON) as client:  # another session: its own keys
        second = await call(client, "kms_append", args)
    assert failed["error"] == "conflict"
    assert not first["_error"] and not second["_error"] and "replayed" not in second
    assert (vault / "drafts/append.md").read_text().count("once") == 2
