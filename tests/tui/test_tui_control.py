"""The dashboard as the control room, driven by Pilot against a real ``kms mcp`` in ANOTHER process: a
staged write appears (badge, bell, pending pane), approve / reject / timeout reach the agent's waiting
call, ``bulk`` stages only big calls, the server obeys pause, resume and revoke, a session is undone."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import apsw
from support.dashboard import settled, wait_for
from support.mcp_stdio import stdio_server
from support.vaults import note_id
from textual.widgets import Input

from tui.app import KmsDashboard, create_app
from tui.screens.control import ConfirmScreen, UndoScreen
from tui.screens.pending import PendingScreen, ReasonScreen
from tui.widgets.pending import PendingBadge
from tui.widgets.sessions import SessionsTable

SID = "s0c0ffee0c0de"


def make_app(db_path: Path, tmp_path: Path) -> KmsDashboard:
    return create_app(db_path, settings_path=tmp_path / "config.toml", poll_interval=0.05)


def server(db_path: Path, tmp_path: Path, **extra: str) -> Any:
    return stdio_server(db_path, tmp_path, KMS_AGENT_WRITE_TOOLS_ENABLED="1", KMS_SESSION_ID=SID, **extra)


async def _staged(app: KmsDashboard, pilot: Any, count: int = 1) -> float:
    """Seconds until the dashboard shows ``count`` waiting calls."""
    return await wait_for(pilot, lambda: len(app.state.pending) == count, timeout=20, what="the staged write")


async def test_staged_write_appears_and_approve_returns_success(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot, server(db_path, tmp_path, KMS_WRITE_APPROVAL="always") as c:
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        assert not app.dashboard.query_one(PendingBadge).display
        call = asyncio.ensure_future(c.call_tool("kms_append", {"noteId": nid, "content": "approve me"}))
        await _staged(app, pilot)
        assert app.dashboard.query_one(PendingBadge).display and app.state.bells == 1
        assert "approve me" not in (vault_dir / "Home.md").read_text()
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, PendingScreen), what="the pending pane")
        screen = app.screen
        assert isinstance(screen, PendingScreen) and screen.shown_id == app.state.pending[0].id
        diff = str(screen.query_one("#pending-diff-text").render())
        assert "+approve me" in diff and "kms_append" in diff
        decided = time.monotonic()
        await pilot.press("a")
        result = await asyncio.wait_for(call, 10)
        returned_after = time.monotonic() - decided
        assert not result.is_error, result.structured_content
        assert "approve me" in (vault_dir / "Home.md").read_text()
        await wait_for(pilot, lambda: not app.state.pending, what="the pane to empty")
        assert not app.dashboard.query_one(PendingBadge).display
    assert returned_after < 2.0  # within 0.5 s of the decision, plus the test's own polling (bench_tui.py)
    assert app.last_control is not None and app.last_control.status == "approved"


async def test_reject_with_reason_from_the_pane(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    before = (vault_dir / "Home.md").read_bytes()
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot, server(db_path, tmp_path, KMS_WRITE_APPROVAL="always") as c:
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        call = asyncio.ensure_future(c.call_tool("kms_append", {"noteId": nid, "content": "reject me"}))
        await _staged(app, pilot)
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, PendingScreen), what="the pending pane")
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonScreen), what="the reason prompt")
        app.screen.query_one("#reject-reason", Input).value = "keep Home short"
        await pilot.press("enter")
        result = await asyncio.wait_for(call, 10)
    assert result.structured_content["error"] == "rejected"
    assert "keep Home short" in result.structured_content["message"]
    assert (vault_dir / "Home.md").read_bytes() == before


async def test_timeout_and_bulk(indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path) -> None:
    nid = note_id(indexed, "Home")
    app = make_app(db_path, tmp_path)
    async with (
        app.run_test(size=(120, 40)) as pilot,
        server(
            db_path, tmp_path, KMS_WRITE_APPROVAL="bulk", KMS_WRITE_APPROVAL_LINES="3", KMS_WRITE_APPROVAL_TIMEOUT="4"
        ) as c,
    ):
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        small = await c.call_tool("kms_append", {"noteId": nid, "content": "small"})
        assert not small.is_error and not app.state.pending and app.state.bells == 0
        big = "\n".join(f"big {i}" for i in range(8))
        call = asyncio.ensure_future(c.call_tool("kms_append", {"noteId": nid, "content": big}))
        await _staged(app, pilot)
        result = await asyncio.wait_for(call, 20)  # nobody decides within the 4 s timeout
        assert result.structured_content["error"] == "approval-timeout"
        await wait_for(pilot, lambda: not app.state.pending, what="the expired call to leave the pane")
    text = (vault_dir / "Home.md").read_text()
    assert "small" in text and "big 0" not in text


async def _select_session(app: KmsDashboard, pilot: Any) -> SessionsTable:
    table = app.dashboard.query_one(SessionsTable)
    await wait_for(pilot, lambda: SID in {k.value for k in table.rows}, timeout=20, what="the session row")
    table.focus()
    table.move_cursor(row=table.get_row_index(SID))
    await pilot.pause()
    return table


def _control(app: KmsDashboard) -> str:
    return next((s.control for s in app.state.sessions if s.id == SID), "?")


async def test_running_server_obeys_pause_resume_revoke_from_the_dashboard(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot, server(db_path, tmp_path) as c:
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        assert not (await c.call_tool("kms_append", {"noteId": nid, "content": "zz-one"})).is_error
        await _select_session(app, pilot)
        await pilot.press("P")
        await wait_for(pilot, lambda: _control(app) == "paused", what="paused")
        assert (await c.call_tool("kms_append", {"noteId": nid, "content": "zz-two"})).structured_content[
            "error"
        ] == "paused"
        await pilot.press("P")
        await wait_for(pilot, lambda: _control(app) == "active", what="resumed")
        assert not (await c.call_tool("kms_append", {"noteId": nid, "content": "zz-three"})).is_error
        await pilot.press("V")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the revoke question")
        await pilot.press("y")
        await wait_for(pilot, lambda: _control(app) == "revoked", what="revoked")
        assert (await c.call_tool("kms_append", {"noteId": nid, "content": "zz-four"})).structured_content[
            "error"
        ] == "revoked"
        assert not (await c.call_tool("kms_read", {"noteId": nid})).is_error
    text = (vault_dir / "Home.md").read_text()
    assert "zz-one" in text and "zz-three" in text and "zz-two" not in text and "zz-four" not in text


async def test_undo_session_with_preview(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    home, recipe = vault_dir / "Home.md", vault_dir / "reference" / "Shakshuka.md"
    before = home.read_bytes()
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot, server(db_path, tmp_path) as c:
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        for text in ("undo one", "undo two"):
            assert not (await c.call_tool("kms_append", {"noteId": note_id(indexed, "Home"), "content": text})).is_error
        assert not (
            await c.call_tool("kms_append", {"noteId": note_id(indexed, "Shakshuka"), "content": "agent tip"})
        ).is_error
        recipe.write_text(recipe.read_text().replace("agent tip", "my tip"))
        await _select_session(app, pilot)
        await pilot.press("U")
        await wait_for(pilot, lambda: isinstance(app.screen, UndoScreen), what="the undo preview")
        screen = app.screen
        assert isinstance(screen, UndoScreen)
        assert len(screen.plan["revert"]) == 2 and [s["path"] for s in screen.plan["skip"]] == [
            "reference/Shakshuka.md"
        ]
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.last_control, dict), what="the undo")
    assert home.read_bytes() == before
    assert "my tip" in recipe.read_text()
    assert len(app.last_control["reverted"]) == 2


async def test_settings_screen_sets_write_approval(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    from tui.screens.settings import SettingsScreen

    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen), what="settings")
        screen = app.screen
        assert isinstance(screen, SettingsScreen)
        screen.set_text("write.approval", "sometimes")
        await pilot.pause()
        assert "off, bulk or always" in screen.errors["write.approval"]
        screen.set_text("write.approval", "bulk")
        screen.set_text("write.approval_lines", "5")
        await pilot.pause()
        assert not screen.errors
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: screen.saved, what="save")
    text = (tmp_path / "config.toml").read_text()
    assert 'approval = "bulk"' in text and "approval_lines = 5" in text
