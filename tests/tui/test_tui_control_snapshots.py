"""SVG snapshots of the control room at 80×24 and 160×48: the badge and a paused session on the main
screen, the pending pane with its diff, the reject prompt, the session-undo preview. Deterministic:
``seed_control`` (fixed ids and times, a frozen clock), UTC."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.control import seed_control
from support.dashboard import Seeded, settled, wait_for

from tui.app import KmsDashboard, create_app
from tui.screens.control import UndoScreen
from tui.screens.pending import PendingScreen, ReasonScreen
from tui.widgets.sessions import SessionsTable

NARROW, WIDE = (80, 24), (160, 48)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return seed_control(tmp_path_factory.mktemp("tui-control-snap"))


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch, world: Seeded) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.chdir(world.db_path.parent)
    yield
    monkeypatch.undo()
    time.tzset()


def app_for(world: Seeded) -> KmsDashboard:
    return create_app(world.db_path, settings_path=Path("config.toml"), clock=lambda: world.now, poll_interval=0.05)


def driver(app: KmsDashboard, keys: tuple[str, ...] = (), until: type | None = None, session: str | None = None) -> Any:
    async def run_before(pilot: Any) -> None:
        await wait_for(pilot, lambda: settled(app) and bool(app.state.pending), what="the dashboard to settle")
        if session:
            table = app.dashboard.query_one(SessionsTable)
            table.focus()
            table.move_cursor(row=table.get_row_index(session))
            await pilot.pause()
        for key in keys:
            await pilot.press(key)
        if until is not None:
            await wait_for(pilot, lambda: isinstance(app.screen, until), what=until.__name__)
        await pilot.pause(0.1)

    return run_before


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "160x48"])
def test_main_screen_badge_and_paused_session(snap_compare: Any, world: Seeded, size: tuple[int, int]) -> None:
    app = app_for(world)
    assert snap_compare(app, terminal_size=size, run_before=driver(app))


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "160x48"])
def test_pending_pane(snap_compare: Any, world: Seeded, size: tuple[int, int]) -> None:
    app = app_for(world)
    assert snap_compare(app, terminal_size=size, run_before=driver(app, ("p",), PendingScreen))


def test_reject_prompt(snap_compare: Any, world: Seeded) -> None:
    app = app_for(world)
    assert snap_compare(app, terminal_size=NARROW, run_before=driver(app, ("p", "x"), ReasonScreen))


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "160x48"])
def test_session_undo_preview(snap_compare: Any, world: Seeded, size: tuple[int, int]) -> None:
    from support.dashboard import SESSION_A

    app = app_for(world)
    assert snap_compare(app, terminal_size=size, run_before=driver(app, ("U",), UndoScreen, session=SESSION_A))
