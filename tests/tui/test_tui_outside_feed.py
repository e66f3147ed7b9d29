"""The dashboard's feed shows an edit a ``kms claude`` session made outside kms (issue 28): the agent's own Edit,
reported by its hooks and seen by the history, appears live as a row of that session; its detail is the diff
against the version before, and ``u`` offers the session's undo (its preview), not a revert of its own."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.dashboard import settled, wait_for
from support.outside import agent_tool

from server.activity.session_registry import start_session
from server.vault.registry import get_vault
from tui.app import create_app
from tui.screens.control import UndoScreen
from tui.screens.note_history import HistoryScreen
from tui.widgets.detail import DetailView

SID = "s0utside0feed"


async def test_an_outside_edit_appears_live_with_its_diff_and_offers_the_session_undo(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    home = vault_dir / "Home.md"
    before = home.read_bytes()
    start_session(indexed, kind="launcher", session_id=SID)
    app = create_app(db_path, settings_path=tmp_path / "config.toml", poll_interval=0.05)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        feed = app.dashboard.feed
        assert not [k for k in feed.rows_by_key if k.startswith("o")]

        # while the dashboard is open
        agent_tool(indexed, get_vault(indexed, "sample"), SID, "Home.md", before + b"\nline by the agent's Edit tool\n")
        await wait_for(pilot, lambda: any(k.startswith("o") for k in feed.rows_by_key), what="the outside row")
        [key] = [k for k in feed.rows_by_key if k.startswith("o")]
        row = feed.rows_by_key[key]
        assert (row["session_id"], row["tool"], row["path"]) == (SID, "Edit (outside kms)", "Home.md")
        assert feed.get_row_index(key) == 0  # the newest row, on top
        cells = [c.plain for c in feed.get_row(key)]
        assert cells[2] == SID and cells[3] == "Edit" and cells[5] == f"↗ +{len(home.read_bytes()) - len(before)}B"

        feed.focus()
        feed.move_cursor(row=0)
        pane = app.dashboard.query_one(DetailView)
        await wait_for(pilot, lambda: pane.outside is not None and settled(app), what="the outside detail")
        text = pane.text()
        assert "↗ Edit (outside kms)" in text and f"session {SID} (reported by its hooks)" in text
        assert "sample/Home.md" in text and "+line by the agent's Edit tool" in text
        assert f"u undoes session {SID}" in text and "r restores version 1 after a yes" in text

        await pilot.press("h")  # a single version back: the note's history, where r restores after a yes
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.loaded, what="history")
        history = app.screen
        assert isinstance(history, HistoryScreen) and history.ref == row["note_id"]
        assert [v["version"] for v in history.versions][:2] == [2, 1]
        assert history.versions[0]["who"]["sessionId"] == SID  # the history tells the same session
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.dashboard, what="back to the dashboard")

        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, UndoScreen), what="the session's undo preview")
        screen = app.screen
        assert isinstance(screen, UndoScreen)
        [item] = screen.plan["outside"]
        assert item["path"] == "Home.md"
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.last_control, dict), what="the undo")
    assert home.read_bytes() == before


async def test_a_session_filter_keeps_only_that_sessions_outside_edits(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    for sid, name in ((SID, "Home.md"), ("s-other", "Reading list.md")):
        start_session(indexed, kind="launcher", session_id=sid)
        edited = (vault_dir / name).read_bytes() + b"\nedited\n"
        agent_tool(indexed, get_vault(indexed, "sample"), sid, name, edited, tool="Write")
    app = create_app(db_path, settings_path=tmp_path / "config.toml", poll_interval=0.05)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        feed = app.dashboard.feed
        outside = lambda: sorted(r["session_id"] for k, r in feed.rows_by_key.items() if k.startswith("o"))  # noqa: E731
        assert outside() == sorted([SID, "s-other"])
        app.dashboard.filters.set_session(SID)
        await wait_for(pilot, lambda: outside() == [SID], what="the filtered feed")
