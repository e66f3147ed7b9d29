"""Detached staging (issue 39): a session whose person is not at a terminal (``review_detached``) is answered
``staged`` at once, nothing written; the person's decision, from the CLI or two deciders at once, applies it
in the decider's process through the write guard, exactly as shown, and the agent asks ``kms_pending`` what
became of it. A real in-memory MCP client throughout."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.cli import kms, ok, refused
from support.mcp_session import mcp_client
from support.vaults import note_id

from server.activity import approvals
from server.errors import KmsError
from server.store.db import connect
from server.writes.review import decide_all, decide_pending

DETACHED: dict[str, Any] = {"write_enabled": True, "approval": "always", "review_detached": True}


async def _stage_append(client: Any, nid: str, text: str) -> dict[str, Any]:
    started = time.monotonic()
    result = await client.call_tool("kms_append", {"noteId": nid, "content": text})
    assert time.monotonic() - started < 5  # answered at once, not after write.approval_timeout
    assert not result.is_error, result.structured_content
    return result.structured_content


async def test_a_detached_write_is_answered_at_once_and_nothing_is_written(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    before = (vault_dir / "Home.md").read_bytes()
    async with mcp_client(db_path, **DETACHED) as client:
        answer = await _stage_append(client, nid, "from far away")
        session = client.runner.session.id
    assert answer["status"] == "staged" and isinstance(answer["pendingId"], int)
    assert "kms approve" in answer["review"] and answer["files"][0]["path"] == "Home.md"
    assert (vault_dir / "Home.md").read_bytes() == before
    item = approvals.get(indexed, answer["pendingId"])
    assert item is not None and item.status == "pending" and item.detached
    assert item.session is not None and item.session["session_id"] == session
    assert item.expires_at - item.created_at >= approvals.DETACHED_WAIT_S  # not write.approval_timeout
    assert indexed.execute("SELECT count(*) FROM tool_invocations WHERE tool = 'kms_append'").fetchall() == [(0,)]


async def test_approved_with_the_cli_it_lands_with_the_session_as_writer_and_the_approver_named(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    async with mcp_client(db_path, **DETACHED) as client:
        pid = (await _stage_append(client, nid, "approved remotely"))["pendingId"]
        session = client.runner.session.id
        out = json.loads(ok(kms("approve", str(pid), "--json")).stdout)
        assert out["status"] == "approved" and out["outcome"] == "applied" and out["detached"] is True
        assert "approved remotely" in (vault_dir / "Home.md").read_text()
        seen = (await client.call_tool("kms_pending", {"pendingId": pid})).structured_content["items"][0]
    assert seen["status"] == "approved" and seen["outcome"] == "applied"
    assert seen["result"]["status"] == "success" and seen["result"]["path"] == "Home.md"
    row = indexed.execute(
        "SELECT session_id, actor, status, message FROM tool_invocations WHERE id = ?",
        (out["applied"]["invocationId"],),
    ).fetchall()[0]
    assert row[0] == session and row[1] == "agent" and row[2] == "success"
    assert f"approved by the person with the kms command (pending #{pid})" == row[3]
    decision = indexed.execute("SELECT actor, tool, message FROM tool_invocations WHERE tool = 'approve'").fetchall()
    assert decision == [("person", "approve", "approved by the person with the kms command")]
    refused(kms("approve", str(pid)))  # decided already: conflict, nothing again


async def test_rejected_it_records_the_reason_and_the_agent_sees_it(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    before = (vault_dir / "Home.md").read_bytes()
    async with mcp_client(db_path, **DETACHED) as client:
        pid = (await _stage_append(client, nid, "unwanted"))["pendingId"]
        out = json.loads(ok(kms("reject", str(pid), "--reason", "not in my log", "--json")).stdout)
        assert out["status"] == "rejected" and out["outcome"] == "rejected"
        seen = (await client.call_tool("kms_pending", {})).structured_content["items"][0]
    assert seen["pendingId"] == pid and seen["status"] == "rejected" and seen["reason"] == "not in my log"
    assert "not in my log" in seen["message"] and seen["result"]["error"] == "rejected"
    assert (vault_dir / "Home.md").read_bytes() == before


async def test_another_sessions_item_is_as_if_absent(indexed: apsw.Connection, db_path: Path) -> None:
    nid = note_id(indexed, "Home")
    async with mcp_client(db_path, **DETACHED) as one, mcp_client(db_path, **DETACHED) as other:
        pid = (await _stage_append(one, nid, "mine"))["pendingId"]
        theirs = await other.call_tool("kms_pending", {"pendingId": pid})
        assert theirs.is_error and theirs.structured_content["error"] == "not-found"
        assert (await other.call_tool("kms_pending", {})).structured_content["items"] == []


async def test_two_deciders_at_once_exactly_one_applies(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    import server.mcp.tools  # noqa: F401 - the write tools a decision applies with

    nid = note_id(indexed, "Home")
    async with mcp_client(db_path, **DETACHED) as client:
        pid = (await _stage_append(client, nid, "decided once"))["pendingId"]
    results: dict[str, Any] = {}
    gate = threading.Barrier(2)

    def decide(channel: str) -> None:
        conn = connect(db_path)
        try:
            gate.wait()
            results[channel] = decide_pending(conn, pid, True, channel=channel)
        except KmsError as e:
            results[channel] = e
        finally:
            conn.close()

    threads = [threading.Thread(target=decide, args=(c,)) for c in ("dashboard", "web")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    won = [c for c, r in results.items() if isinstance(r, dict)]
    lost = [r for r in results.values() if isinstance(r, KmsError)]
    assert len(won) == 1 and len(lost) == 1, results
    assert lost[0].kind == "conflict" and "approved by the person" in lost[0].message
    assert lost[0].extra["channel"] == won[0]
    assert (vault_dir / "Home.md").read_text().count("decided once") == 1
    applied = indexed.execute("SELECT count(*) FROM tool_invocations WHERE tool = 'kms_append'").fetchall()
    assert applied == [(1,)]


async def test_a_note_changed_since_staging_is_a_conflict_and_nothing_is_written(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    home = vault_dir / "Home.md"
    async with mcp_client(db_path, **DETACHED) as client:
        pid = (await _stage_append(client, nid, "too late"))["pendingId"]
        home.write_text(home.read_text() + "\nthe person's own line\n")
        changed = home.read_bytes()
        result = refused(kms("approve", str(pid)))
        assert "changed since" in " ".join(result.stderr.split())
        seen = (await client.call_tool("kms_pending", {"pendingId": pid})).structured_content["items"][0]
    assert home.read_bytes() == changed
    assert seen["status"] == "approved" and seen["outcome"] == "conflict"


@pytest.mark.parametrize("approve", [True, False])
async def test_a_blocking_sessions_item_is_only_recorded_by_the_decider(
    indexed: apsw.Connection, db_path: Path, approve: bool
) -> None:
    """The decider of a waiting session's call records the decision; the waiting server applies it."""
    import os

    from server.config.session_contract import SessionConfig
    from server.mcp.tools.base import WriteSpec
    from server.mcp.tools.dispatch import ToolRunner

    cfg = SessionConfig.from_env(
        {"KMS_DB_PATH": str(db_path), "KMS_CONFIG": os.environ["KMS_CONFIG"]},
        watch=False,
        write_enabled=True,
        approval="always",
    )
    runner = ToolRunner(cfg)
    try:
        spec = runner.by_name["kms_append"]
        assert isinstance(spec, WriteSpec)
        staged = runner.writes.stage(spec, {"noteId": note_id(indexed, "Home"), "content": "x"})
        assert staged is not None and not staged.detached
        out = decide_pending(indexed, staged.id, approve, channel="cli")
        assert out["detached"] is False and out["applied"] is None
        assert indexed.execute("SELECT count(*) FROM tool_invocations WHERE tool = 'kms_append'").fetchall() == [(0,)]
    finally:
        runner.close()


async def test_a_keyed_retry_of_a_waiting_call_gets_the_same_ticket(indexed: apsw.Connection, db_path: Path) -> None:
    args = {"noteId": note_id(indexed, "Home"), "content": "once", "idempotencyKey": "k-1"}
    async with mcp_client(db_path, **DETACHED) as client:
        first = (await client.call_tool("kms_append", args)).structured_content
        again = (await client.call_tool("kms_append", args)).structured_content
        other = (await client.call_tool("kms_append", {**args, "idempotencyKey": "k-2"})).structured_content
    assert first["status"] == again["status"] == "staged" and first["pendingId"] == again["pendingId"]
    assert other["pendingId"] != first["pendingId"]
    assert len(approvals.list_pending(indexed)) == 2


async def test_past_its_time_it_expires_and_no_decision_lands(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    import server.mcp.tools  # noqa: F401 - the write tools a decision applies with

    nid = note_id(indexed, "Home")
    before = (vault_dir / "Home.md").read_bytes()
    async with mcp_client(db_path, **DETACHED) as client:
        pid = (await _stage_append(client, nid, "too slow"))["pendingId"]
        kept = (await _stage_append(client, nid, "in time"))["pendingId"]
        indexed.execute("UPDATE pending_writes SET expires_at = ? WHERE id = ?", (time.time() - 1, pid))  # a week on
        seen = (await client.call_tool("kms_pending", {"pendingId": pid})).structured_content["items"][0]
        assert seen["status"] == "expired" and "nobody decided" in seen["message"]
        out = decide_all(indexed, [pid, kept, 999_999], False, channel="cli", reason="no")
    assert [o.get("error") for o in out] == ["conflict", None, "not-found"]
    assert out[1]["status"] == "rejected" and out[1]["outcome"] == "rejected"
    assert (vault_dir / "Home.md").read_bytes() == before


async def test_the_cli_decides_several_ids_in_turn(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    """Each staged call is what it would do to the notes as they were: a second call on the same note, staged
    before the first landed, is a conflict once the first has (the agent sees it and stages it again)."""
    nid = note_id(indexed, "Home")
    async with mcp_client(db_path, **DETACHED) as client:
        one = (await _stage_append(client, nid, "first of two"))["pendingId"]
        two = (await _stage_append(client, nid, "second of two"))["pendingId"]
        result = kms("approve", str(one), str(two), "999999", "--json")
        seen = (await client.call_tool("kms_pending", {"pendingId": two})).structured_content["items"][0]
    assert result.exit_code == 1  # the first refusal's code: a conflict
    out = json.loads(result.stdout)
    assert out[0]["outcome"] == "applied" and out[1]["error"] == "conflict" and out[2]["error"] == "not-found"
    text = (vault_dir / "Home.md").read_text()
    assert "first of two" in text and "second of two" not in text
    assert seen["status"] == "approved" and seen["outcome"] == "conflict"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_detached_session_never_asks_the_host(indexed: apsw.Connection, db_path: Path, mode: str) -> None:
    """A client that declares form elicitation is still answered `staged` at once: the person who decides is
    not at that host (a remote grant's client), in either protocol era."""
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> Any:
        asked.append(params.message)
        raise AssertionError("a detached session must not ask the host")

    options = {"mode": mode, "elicitation_callback": elicit}
    async with mcp_client(db_path, client_options=options, **DETACHED) as client:
        answer = await _stage_append(client, note_id(indexed, "Home"), "no dialog")
    assert answer["status"] == "staged" and asked == []
    item = approvals.get(indexed, answer["pendingId"])
    assert item is not None and not item.asking_host
