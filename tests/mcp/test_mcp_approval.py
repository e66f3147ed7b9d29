"""Approve before it lands, through the real MCP server and client: the call waits (without blocking the
loop), the person decides from another connection, the call returns the real outcome."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import apsw
from support.mcp_session import mcp_client
from support.sql import tuples
from support.vaults import note_id

from server.activity import approvals, control
from server.activity.session_registry import touch_session
from server.store.db import connect

if TYPE_CHECKING:
    from mcp_types import CallToolResult


async def _first_pending(db_path: Path, timeout: float = 10.0, now: float | None = None) -> approvals.Pending:
    conn = connect(db_path)
    try:
        with anyio.fail_after(timeout):
            while not (found := approvals.list_pending(conn, now=now)):
                await anyio.sleep(0.02)
        return found[0]
    finally:
        conn.close()


def _decide(db_path: Path, pid: int, approve: bool, reason: str | None = None) -> None:
    conn = connect(db_path)
    try:
        approvals.decide(conn, pid, approve=approve, reason=reason)
    finally:
        conn.close()


def _home(vault_dir: Path) -> Path:
    return vault_dir / "Home.md"


async def test_approved_call_is_written_and_returns_success(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    before = _home(vault_dir).read_bytes()
    results: dict[str, CallToolResult] = {}
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with mcp_client(db_path, write_enabled=True, approval="always") as client:

        async def agent() -> None:
            results["append"] = await client.call_tool(
                "kms_append", {"noteId": nid, "content": "approved line"}, progress_callback=on_progress
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(agent)
            item = await _first_pending(db_path)
            assert _home(vault_dir).read_bytes() == before  # staged, not written
            # the loop is free while the call waits: a read of the same session answers
            read = await client.call_tool("kms_read", {"noteId": nid})
            assert not read.is_error and "approved line" not in read.structured_content["body"]
            assert item.tool == "kms_append" and item.status == "pending" and len(item.files) == 1
            staged = item.files[0]
            assert staged["path"] == "Home.md" and "+approved line" in staged["diff"]
            _decide(db_path, item.id, True)
    result = results["append"]
    assert not result.is_error, result.structured_content
    assert result.structured_content["changed"] is True
    assert _home(vault_dir).read_bytes().decode().rstrip().endswith("approved line")
    assert updates and updates[0][1] == 120.0 and "pending change" in (updates[0][2] or "")
    rows = tuples(indexed, "SELECT tool, actor, status, message FROM tool_invocations ORDER BY id")
    assert rows[0][:3] == ("approve", "person", "success")
    assert rows[1][:3] == ("kms_append", "agent", "success") and "approved by the person" in rows[1][3]
    done = approvals.get(indexed, item.id)
    assert done is not None and done.status == "approved" and done.outcome == "applied"


async def test_rejected_call_writes_nothing_and_returns_the_reason(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    before = _home(vault_dir).read_bytes()
    results: dict[str, CallToolResult] = {}
    async with mcp_client(db_path, write_enabled=True, approval="always") as client:

        async def agent() -> None:
            results["r"] = await client.call_tool("kms_append", {"noteId": nid, "content": "nope"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(agent)
            item = await _first_pending(db_path)
            _decide(db_path, item.id, False, "not in my home note")
    result = results["r"]
    assert result.is_error
    assert result.structured_content["error"] == "rejected"
    assert "not in my home note" in result.structured_content["message"]
    assert _home(vault_dir).read_bytes() == before
    rows = indexed.execute("SELECT tool, actor, status, error FROM tool_invocations ORDER BY id").fetchall()
    assert rows == [("reject", "person", "success", None), ("kms_append", "agent", "refused", "rejected")]


async def test_timeout_writes_nothing(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    nid = note_id(indexed, "Home")
    before = _home(vault_dir).read_bytes()
    clock = [1000.0]
    async with mcp_client(db_path, write_enabled=True, approval="always", approval_timeout=30) as client:
        client.runner.session.clock = lambda: clock[0]
        results: dict[str, CallToolResult] = {}

        async def agent() -> None:
            results["r"] = await client.call_tool("kms_append", {"noteId": nid, "content": "late"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(agent)
            item = await _first_pending(db_path, now=1000.0)  # (the server's clock is injected)
            assert item.expires_at == 1030.0
            clock[0] = 1031.0  # the person never answers
    result = results["r"]
    assert result.structured_content["error"] == "approval-timeout"
    assert _home(vault_dir).read_bytes() == before
    done = approvals.get(indexed, item.id)
    assert done is not None and done.status == "expired" and done.outcome == "approval-timeout"


async def test_note_changed_while_waiting_is_a_conflict(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    results: dict[str, CallToolResult] = {}
    async with mcp_client(db_path, write_enabled=True, approval="always") as client:

        async def agent() -> None:
            results["r"] = await client.call_tool("kms_append", {"noteId": nid, "content": "agent text"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(agent)
            item = await _first_pending(db_path)
            with _home(vault_dir).open("a", encoding="utf-8") as f:
                f.write("the person's own line\n")
            mine = _home(vault_dir).read_bytes()
            _decide(db_path, item.id, True)
    assert results["r"].structured_content["error"] == "conflict"
    assert _home(vault_dir).read_bytes() == mine


async def test_bulk_stages_only_big_calls(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    nid = note_id(indexed, "Home")
    async with mcp_client(db_path, write_enabled=True, approval="bulk", approval_lines=5) as client:
        small = await client.call_tool("kms_append", {"noteId": nid, "content": "one small line"})
        assert not small.is_error and approvals.count_open(indexed) == 0
        results: dict[str, CallToolResult] = {}

        async def agent() -> None:
            big = "\n".join(f"line {i}" for i in range(10))
            results["r"] = await client.call_tool("kms_append", {"noteId": nid, "content": big})

        async with anyio.create_task_group() as tg:
            tg.start_soon(agent)
            item = await _first_pending(db_path)
            assert item.lines >= 10
            _decide(db_path, item.id, True)
    assert not results["r"].is_error
    assert "line 9" in _home(vault_dir).read_text()


async def test_pause_resume_revoke_take_effect_on_the_next_call(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    async with mcp_client(db_path, write_enabled=True) as client:
        sid = client.runner.config.session_id
        touch_session(indexed, sid)  # (the heartbeat service is not started in process)
        assert not (await client.call_tool("kms_append", {"noteId": nid, "content": "a"})).is_error
        control.set_state(indexed, sid, "paused", reason="lunch")
        paused = await client.call_tool("kms_append", {"noteId": nid, "content": "b"})
        assert paused.structured_content["error"] == "paused" and "lunch" in paused.structured_content["message"]
        control.set_state(indexed, sid, "active")
        assert not (await client.call_tool("kms_append", {"noteId": nid, "content": "c"})).is_error
        control.set_state(indexed, sid, "revoked")
        revoked = await client.call_tool("kms_append", {"noteId": nid, "content": "d"})
        assert revoked.structured_content["error"] == "revoked"
        assert not (await client.call_tool("kms_read", {"noteId": nid})).is_error  # reads keep working
    text = _home(vault_dir).read_text()
    assert "\na\n" in text and "\nc\n" in text and "\nb\n" not in text and "\nd\n" not in text


async def test_a_call_cancelled_while_waiting_can_no_longer_be_approved(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    before = _home(vault_dir).read_bytes()
    async with mcp_client(db_path, write_enabled=True, approval="always") as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "kms_append", {"noteId": nid, "content": "never"})
            item = await _first_pending(db_path)
            tg.cancel_scope.cancel()  # the host gives up on the call
        with anyio.fail_after(10):
            while (row := approvals.get(indexed, item.id)) is not None and row.status == "pending":
                await anyio.sleep(0.02)
    assert row is not None and row.status == "cancelled" and row.outcome == "cancelled"
    conn = connect(db_path)
    try:
        try:
            approvals.decide(conn, item.id, approve=True)
            raise AssertionError("a cancelled call cannot be approved")
        except Exception as e:
            assert getattr(e, "kind", None) == "conflict"
    finally:
        conn.close()
    assert _home(vault_dir).read_bytes() == before
    rows = indexed.execute("SELECT tool, status, error FROM tool_invocations").fetchall()
    assert rows == [("kms_append", "error", "cancelled")]
