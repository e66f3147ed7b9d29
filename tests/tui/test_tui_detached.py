"""The dashboard decides a detached staged call (a remote grant's: nobody waits on it) in its own process:
`a` applies it exactly as shown, through the write guard of the session that staged it."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.dashboard import settled, wait_for
from support.mcp_session import mcp_client
from support.vaults import note_id

from server.activity import approvals
from tui.app import create_app
from tui.screens.pending import PendingScreen


async def test_the_dashboard_applies_a_detached_call_when_approved(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    async with mcp_client(db_path, write_enabled=True, approval="always", review_detached=True) as client:
        staged = await client.call_tool("kms_append", {"noteId": nid, "content": "applied by the dashboard"})
        session = client.runner.session.id
    pid = staged.structured_content["pendingId"]
    app = create_app(db_path, settings_path=tmp_path / "config.toml", poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: settled(app) and len(app.state.pending) == 1, what="the staged write")
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, PendingScreen), what="the pending pane")
        await pilot.press("a")
        await wait_for(pilot, lambda: app.last_control is not None, what="the decision")
    done = app.last_control
    assert isinstance(done, approvals.Pending) and done.id == pid and done.outcome == "applied", done
    assert "applied by the dashboard" in (vault_dir / "Home.md").read_text()
    row = indexed.execute("SELECT session_id, message FROM tool_invocations WHERE id = ?", (done.invocation_id,))
    assert row.fetchall() == [(session, f"approved by the person in the dashboard (pending #{pid})")]
