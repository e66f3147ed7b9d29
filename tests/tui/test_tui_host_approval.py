"""The dashboard beside the host's own approval dialog (issue 27): with ``write.approval_channel = host`` the
bell waits while the host asks the person, rings when they dismiss the host's dialog, and the dashboard's
decision is recorded as the dashboard's; with ``both`` it rings at once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import apsw
import mcp_types as types
import pytest
from support.dashboard import settled, wait_for
from support.mcp_session import mcp_client
from support.vaults import note_id

from server.activity import approvals
from tui.app import KmsDashboard, create_app
from tui.screens.pending import PendingScreen


def make_app(db_path: Path, tmp_path: Path) -> KmsDashboard:
    return create_app(db_path, settings_path=tmp_path / "config.toml", poll_interval=0.05)


async def _unused(_ctx: Any, _params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("the test answers the host's round trip itself")


@pytest.mark.parametrize("channel", ["host", "both"])
async def test_the_bell_waits_while_the_host_asks_and_the_dashboard_decides(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path, channel: str
) -> None:
    nid = note_id(indexed, "Home")
    args = {"noteId": nid, "content": "decided in the dashboard"}
    options = {"mode": "2026-07-28", "elicitation_callback": _unused}
    app = make_app(db_path, tmp_path)
    async with (
        app.run_test(size=(120, 40)) as pilot,
        mcp_client(
            db_path, write_enabled=True, approval="always", approval_channel=channel, client_options=options
        ) as client,
    ):
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        asked = await client.session.call_tool("kms_append", args, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult)
        await wait_for(pilot, lambda: len(app.state.pending) == 1, timeout=20, what="the staged write")
        await pilot.pause(0.3)  # a few of the dashboard's polls
        item = app.state.pending[0]
        assert item.asking_host is (channel == "host")
        assert app.state.bells == (0 if channel == "host" else 1)
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, PendingScreen), what="the pending pane")
        diff = str(app.screen.query_one("#pending-diff-text").render())
        assert ("the agent's host is asking you about it too" in diff) is (channel == "host")
        # the person presses Esc in the host: the host retries with cancel and the call waits for the dashboard
        cancel: types.InputResponses = {"kms_approval": types.ElicitResult(action="cancel")}
        call = asyncio.ensure_future(
            client.session.call_tool("kms_append", args, input_responses=cancel, request_state=asked.request_state)
        )
        await wait_for(pilot, lambda: app.state.bells == 1, timeout=10, what="the bell")
        await wait_for(pilot, lambda: not app.state.pending[0].asking_host, timeout=10, what="the host to stop")
        await pilot.press("a")
        result = await asyncio.wait_for(call, 10)
        assert not result.is_error, result.structured_content
    assert app.state.bells == 1
    assert "decided in the dashboard" in (vault_dir / "Home.md").read_text()
    done = approvals.get(indexed, item.id)
    assert done is not None and done.channel == "dashboard" and done.outcome == "applied"
