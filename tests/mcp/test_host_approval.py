"""Approve inside the host (issue 27), through the real MCP server and the SDK's client in both protocol eras:
on 2025-11-25 the server asks with ``elicitation/create`` inside the call, on 2026-07-28 the call answers
``input_required`` and the client retries with the person's answer. The person's answer is the client's
elicitation callback; the dashboard is ``approvals.decide`` from another connection, as the dashboard does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import apsw
import mcp_types as types
import pytest
from support.mcp_session import mcp_client
from support.sql import tuples, value
from support.vaults import note_id

from server.activity import approvals
from server.store.db import connect

ERAS = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}
Answer = Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult]]


def _home(vault_dir: Path) -> Path:
    return vault_dir / "Home.md"


def _form(decision: str, reason: str | None = None) -> types.ElicitResult:
    content: dict[str, Any] = {"decision": decision, **({"reason": reason} if reason else {})}
    return types.ElicitResult(action="accept", content=content)


def _host(answer: Answer, asked: list[types.ElicitRequestParams]) -> dict[str, Any]:
    async def callback(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return await answer(params)

    return {"elicitation_callback": callback}


def _decide(db_path: Path, pid: int, approve: bool, reason: str | None = None) -> None:
    conn = connect(db_path)
    try:
        approvals.decide(conn, pid, approve=approve, reason=reason, channel="dashboard")
    finally:
        conn.close()


async def _waiting(db_path: Path) -> approvals.Pending:
    conn = connect(db_path)
    try:
        with anyio.fail_after(10):
            while not (found := approvals.list_pending(conn)):
                await anyio.sleep(0.02)
        return found[0]
    finally:
        conn.close()


def _decisions(conn: apsw.Connection) -> list[tuple[str, str]]:
    return tuples(conn, "SELECT tool, message FROM tool_invocations WHERE actor = 'person' ORDER BY id")


def _stored(conn: apsw.Connection, pid: int) -> approvals.Pending:
    found = approvals.get(conn, pid)
    assert found is not None, pid
    return found


@pytest.mark.parametrize("era", ERAS)
async def test_the_host_applies_exactly_what_it_showed(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, era: str
) -> None:
    nid = note_id(indexed, "Home")
    asked: list[types.ElicitRequestParams] = []

    async def apply(_params: types.ElicitRequestParams) -> types.ElicitResult:
        assert _home(vault_dir).read_bytes().decode().count("from the host") == 0  # staged, not written
        return _form("apply")

    options = {"mode": ERAS[era], **_host(apply, asked)}
    async with mcp_client(db_path, write_enabled=True, approval="always", client_options=options) as client:
        result = await client.call_tool("kms_append", {"noteId": nid, "content": "from the host"})
    assert not result.is_error, result.structured_content
    assert _home(vault_dir).read_text().rstrip().endswith("from the host")
    assert len(asked) == 1
    message = asked[0].message
    assert "kms_append" in message and "sample:Home.md (+2 -0)" in message and "+from the host" in message
    assert isinstance(asked[0], types.ElicitRequestFormParams)  # kms asks with a form, never a URL
    schema = asked[0].requested_schema
    assert schema["properties"]["decision"]["enum"] == ["apply", "reject"]
    assert schema["properties"]["decision"]["default"] == "apply"  # Enter in the host's dialog applies
    assert _decisions(indexed) == [("approve", "approved by the person in the host")]
    row = value(indexed, "SELECT message FROM tool_invocations WHERE tool = 'kms_append'")
    assert "approved by the person in the host" in row
    done = approvals.list_pending(indexed, status=None)[0]
    assert done.status == "approved" and done.channel == "host" and done.outcome == "applied"


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (types.ElicitResult(action="decline"), "declined in the host"),
        (_form("reject", "  not in my home note  "), "not in my home note"),
    ],
)
async def test_decline_or_reject_in_the_host_records_a_rejection_with_the_reason(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, era: str, answer: types.ElicitResult, reason: str
) -> None:
    nid = note_id(indexed, "Home")
    before = _home(vault_dir).read_bytes()

    async def no(_params: types.ElicitRequestParams) -> types.ElicitResult:
        return answer

    options = {"mode": ERAS[era], **_host(no, [])}
    async with mcp_client(db_path, write_enabled=True, approval="always", client_options=options) as client:
        result = await client.call_tool("kms_append", {"noteId": nid, "content": "nope"})
    assert result.is_error and result.structured_content["error"] == "rejected"
    assert reason in result.structured_content["message"]
    assert _home(vault_dir).read_bytes() == before
    assert _decisions(indexed) == [("reject", f"rejected by the person in the host: {reason}")]
    done = approvals.list_pending(indexed, status=None)[0]
    assert done.status == "rejected" and done.channel == "host" and done.reason == reason


@pytest.mark.parametrize("era", ERAS)
async def test_cancel_in_the_host_leaves_the_call_to_the_dashboard(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, era: str
) -> None:
    nid = note_id(indexed, "Home")
    cancelled = anyio.Event()

    async def esc(_params: types.ElicitRequestParams) -> types.ElicitResult:
        cancelled.set()
        return types.ElicitResult(action="cancel")

    options = {"mode": ERAS[era], **_host(esc, [])}
    results: dict[str, Any] = {}
    async with mcp_client(db_path, write_enabled=True, approval="always", client_options=options) as client:

        async def agent() -> None:
            results["r"] = await client.call_tool("kms_append", {"noteId": nid, "content": "dashboard says yes"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(agent)
            with anyio.fail_after(10):
                await cancelled.wait()
            item = await _waiting(db_path)
            await anyio.sleep(0.3)  # the wait is the test: after the host's cancel the call goes on, still pending
            assert _stored(indexed, item.id).status == "pending"
            _decide(db_path, item.id, True)
    assert not results["r"].is_error, results["r"].structured_content
    assert "dashboard says yes" in _home(vault_dir).read_text()
    assert _decisions(indexed) == [("approve", "approved by the person in the dashboard")]
    assert _stored(indexed, item.id).channel == "dashboard"


@pytest.mark.parametrize("era", ERAS)
async def test_the_dashboard_deciding_first_wins_over_the_hosts_later_answer(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, era: str
) -> None:
    nid = note_id(indexed, "Home")
    before = _home(vault_dir).read_bytes()
    shown, decided = anyio.Event(), anyio.Event()

    async def slow_yes(_params: types.ElicitRequestParams) -> types.ElicitResult:
        shown.set()
        await decided.wait()  # the person rejects in the dashboard while the host's dialog is open
        return _form("apply")

    options = {"mode": ERAS[era], **_host(slow_yes, [])}
    results: dict[str, Any] = {}
    async with mcp_client(db_path, write_enabled=True, approval="always", client_options=options) as client:

        async def agent() -> None:
            results["r"] = await client.call_tool("kms_append", {"noteId": nid, "content": "too late"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(agent)
            with anyio.fail_after(10):
                await shown.wait()
            item = await _waiting(db_path)
            _decide(db_path, item.id, False, "dashboard first")
            decided.set()
    result = results["r"]
    assert result.is_error and result.structured_content["error"] == "rejected"
    assert "dashboard first" in result.structured_content["message"]
    assert _home(vault_dir).read_bytes() == before
    assert _decisions(indexed) == [("reject", "rejected by the person in the dashboard: dashboard first")]
    assert _stored(indexed, item.id).channel == "dashboard"


@pytest.mark.parametrize("era", ERAS)
async def test_the_dashboard_channel_never_asks_the_host(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, era: str
) -> None:
    nid = note_id(indexed, "Home")
    asked: list[types.ElicitRequestParams] = []

    async def apply(_params: types.ElicitRequestParams) -> types.ElicitResult:
        return _form("apply")

    options = {"mode": ERAS[era], **_host(apply, asked)}
    results: dict[str, Any] = {}
    async with mcp_client(
        db_path, write_enabled=True, approval="always", approval_channel="dashboard", client_options=options
    ) as client:

        async def agent() -> None:
            results["r"] = await client.call_tool("kms_append", {"noteId": nid, "content": "via dashboard"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(agent)
            item = await _waiting(db_path)
            _decide(db_path, item.id, True)
    assert not results["r"].is_error and asked == []
    assert "via dashboard" in _home(vault_dir).read_text()


async def _input_required(client: Any, args: dict[str, Any]) -> types.InputRequiredResult:
    first = await client.session.call_tool("kms_append", args, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult), first
    assert first.request_state and first.input_requests
    return first


async def test_a_forged_request_state_is_refused_and_changes_nothing(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    """2026-07-28: the host echoes the state; one altered, made up, or echoed for other arguments is refused
    typed, the staged call still waits, and the genuine answer still lands."""
    nid = note_id(indexed, "Home")
    args = {"noteId": nid, "content": "genuine"}
    yes: types.InputResponses = {"kms_approval": _form("apply")}
    options = {"mode": "2026-07-28", **_host(lambda _p: _never(), [])}
    async with mcp_client(db_path, write_enabled=True, approval="always", client_options=options) as client:
        first = await _input_required(client, args)
        state = first.request_state
        assert state is not None
        body, mac = state.split(".")
        tampered = body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + "." + mac
        for bad_state, bad_args in (
            (tampered, args),
            ("made-up", args),
            (state, {"noteId": nid, "content": "something else"}),
        ):
            refused = await client.session.call_tool(
                "kms_append", bad_args, input_responses=yes, request_state=bad_state
            )
            assert refused.is_error and refused.structured_content["error"] == "invalid-input"
            assert refused.structured_content["problem"] == "forged-request-state"
        pending = approvals.list_pending(indexed)
        assert len(pending) == 1 and pending[0].status == "pending"
        assert "genuine" not in _home(vault_dir).read_text() and "something else" not in _home(vault_dir).read_text()
        done = await client.session.call_tool("kms_append", args, input_responses=yes, request_state=state)
        assert not done.is_error, done.structured_content
    assert "genuine" in _home(vault_dir).read_text()


async def test_a_replayed_request_state_is_refused(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    nid = note_id(indexed, "Home")
    args = {"noteId": nid, "content": "once"}
    yes: types.InputResponses = {"kms_approval": _form("apply")}
    options = {"mode": "2026-07-28", **_host(lambda _p: _never(), [])}
    async with mcp_client(db_path, write_enabled=True, approval="always", client_options=options) as client:
        first = await _input_required(client, args)
        state = first.request_state
        done = await client.session.call_tool("kms_append", args, input_responses=yes, request_state=state)
        assert not done.is_error
        again = await client.session.call_tool(
            "kms_append", args, input_responses=yes, request_state=first.request_state
        )
        assert again.is_error and again.structured_content["problem"] == "replayed-request-state"
        answers = await client.session.call_tool("kms_append", args, input_responses=yes)
        assert answers.is_error and answers.structured_content["problem"] == "forged-request-state"
    assert _home(vault_dir).read_text().count("once") == 1
    rows = indexed.execute("SELECT tool FROM tool_invocations ORDER BY id").fetchall()
    assert rows == [("approve",), ("kms_append",)]  # the refusals recorded nothing and wrote nothing


async def test_a_state_minted_for_another_session_is_forged_there(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    args = {"noteId": nid, "content": "elsewhere"}
    yes: types.InputResponses = {"kms_approval": _form("apply")}
    options = {"mode": "2026-07-28", **_host(lambda _p: _never(), [])}
    async with (
        mcp_client(db_path, write_enabled=True, approval="always", client_options=options) as a,
        mcp_client(db_path, write_enabled=True, approval="always", client_options=options) as b,
    ):
        first = await _input_required(a, args)
        stolen = await b.session.call_tool("kms_append", args, input_responses=yes, request_state=first.request_state)
        assert stolen.is_error and stolen.structured_content["problem"] == "forged-request-state"
    assert "elsewhere" not in _home(vault_dir).read_text()
    # the session that staged it ended without an answer: the call is recorded cancelled, nothing written
    done = approvals.list_pending(indexed, status=None)[0]
    assert done.status == "cancelled" and done.outcome == "cancelled"


async def _never() -> types.ElicitResult:
    raise AssertionError("these tests answer the round trip themselves")


async def test_a_call_whose_host_never_came_back_is_cancelled_once_its_time_is_up(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    """2026-07-28: a parked call the host never retried ends at the session's next write after its time."""
    nid = note_id(indexed, "Home")
    clock = [1000.0]
    options = {"mode": "2026-07-28", **_host(lambda _p: _never(), [])}
    async with mcp_client(
        db_path, write_enabled=True, approval="always", approval_timeout=30, client_options=options
    ) as client:
        client.runner.session.clock = lambda: clock[0]
        first = await _input_required(client, {"noteId": nid, "content": "forgotten"})
        clock[0] = 1031.0
        await _input_required(client, {"noteId": nid, "content": "the next one"})
        late = await client.session.call_tool(
            "kms_append",
            {"noteId": nid, "content": "forgotten"},
            input_responses={"kms_approval": _form("apply")},
            request_state=first.request_state,
        )
        assert late.is_error and late.structured_content["problem"] == "replayed-request-state"
    rows = approvals.list_pending(indexed, status=None)
    assert [(r.status, r.outcome) for r in sorted(rows, key=lambda r: r.id)][0] == ("cancelled", "cancelled")
    assert "forgotten" not in _home(vault_dir).read_text()
