"""The dashboard's session undo (``U`` on a session row) uses the same core as ``kms session undo``: its preview
lists the notes the session changed outside kms (its agent's own Edit tool, reported by its hooks) and ``y``
restores them byte for byte (issue 28)."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.dashboard import settled, wait_for
from support.outside import agent_tool
from textual.widgets import Static

from server.activity.session_registry import start_session
from server.vault.registry import get_vault
from tui.app import create_app
from tui.screens.control import UndoScreen
from tui.widgets.sessions import SessionsTable

SID = "s0utside0edit"


async def test_the_undo_preview_lists_and_restores_an_outside_edit(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    home = vault_dir / "Home.md"
    before = home.read_bytes()
    start_session(indexed, kind="launcher", session_id=SID)
    agent_tool(indexed, get_vault(indexed, "sample"), SID, "Home.md", before + b"\nline by the agent's Edit tool\n")

    app = create_app(db_path, settings_path=tmp_path / "config.toml", poll_interval=0.05)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        table = app.dashboard.query_one(SessionsTable)
        await wait_for(pilot, lambda: SID in {k.value for k in table.rows}, timeout=20, what="the session row")
        table.focus()
        table.move_cursor(row=table.get_row_index(SID))
        await pilot.pause()
        await pilot.press("U")
        await wait_for(pilot, lambda: isinstance(app.screen, UndoScreen), what="the undo preview")
        screen = app.screen
        assert isinstance(screen, UndoScreen)
        [item] = screen.plan["outside"]
        assert item["path"] == "Home.md" and item["action"] == "restore"
        shown = str(screen.query_one("#undo-list Static", Static).render())
        assert "sample:Home.md · outside edit reported by the session (Edit)" in shown
        assert f"back to version 1, {len(before) - len(home.read_bytes()):+d} bytes" in shown
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.last_control, dict), what="the undo")
    assert home.read_bytes() == before
    assert isinstance(app.last_control, dict) and len(app.last_control["restored"]) == 1
