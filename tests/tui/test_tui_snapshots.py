"""SVG snapshots of the dashboard's main screens at 80×24 and 160×48.

Deterministic by construction: ``seed_fixed`` (fixed session and note ids, fixed
timestamps), a frozen clock injected into ``create_app``, UTC, and every screenshot
taken only once the app has settled. Regenerate with ``--snapshot-update`` after an
intended change and review the SVGs (``snapshot_report.html`` shows diffs).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.dashboard import Seeded, seed_fixed, settled, wait_for

from tui.app import KmsDashboard, create_app
from tui.screens.invocation import InvocationScreen
from tui.screens.modals import NoteScreen, ReadsScreen, ReviewScreen
from tui.screens.settings import SettingsScreen

NARROW, WIDE = (80, 24), (160, 48)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return seed_fixed(tmp_path_factory.mktemp("tui-snap"))


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch, world: Seeded) -> Iterator[None]:
    """Times render in UTC; the settings path renders as a bare file name."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.chdir(world.db_path.parent)
    yield
    monkeypatch.undo()
    time.tzset()


def app_for(world: Seeded) -> KmsDashboard:
    return create_app(world.db_path, settings_path=Path("config.toml"), clock=lambda: world.now, poll_interval=0.05)


def driver(
    app: KmsDashboard,
    world: Seeded,
    *,
    select: str | None = None,
    keys: tuple[str, ...] = (),
    until: Callable[[KmsDashboard], bool] | None = None,
) -> Callable[[Any], Any]:
    """Wait for the app to settle, select a row, press keys, wait for the resulting screen."""

    async def run_before(pilot: Any) -> None:
        await wait_for(pilot, lambda: settled(app), what="the dashboard to settle")
        if select:
            target = world.ids[select]
            app.dashboard.feed.select(target)
            await wait_for(pilot, lambda: settled(app) and app.dashboard.detail_id == target, what="detail")
        for key in keys:
            await pilot.press(key)
        if until:
            await wait_for(pilot, lambda: until(app), what="the screen")
        await pilot.pause(0.1)

    return run_before


def shows(kind: type) -> Callable[[KmsDashboard], bool]:
    def ready(app: KmsDashboard) -> bool:
        screen = app.screen
        if not isinstance(screen, kind):
            return False
        if isinstance(screen, InvocationScreen):
            return screen.query_one("#detail-full").detail is not None  # type: ignore[attr-defined]
        return True

    return ready


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "160x48"])
def test_main_screen(snap_compare: Any, world: Seeded, size: tuple[int, int]) -> None:
    app = app_for(world)
    assert snap_compare(app, terminal_size=size, run_before=driver(app, world, select="b_append3"))


def test_invocation_screen(snap_compare: Any, world: Seeded) -> None:
    app = app_for(world)
    run = driver(app, world, select="a_insert", keys=("enter",), until=shows(InvocationScreen))
    assert snap_compare(app, terminal_size=NARROW, run_before=run)


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "160x48"])
def test_review_screen(snap_compare: Any, world: Seeded, size: tuple[int, int]) -> None:
    app = app_for(world)
    run = driver(app, world, select="b_append2", keys=("u",), until=shows(ReviewScreen))
    assert snap_compare(app, terminal_size=size, run_before=run)


def test_review_refused(snap_compare: Any, world: Seeded, vault_edit: None) -> None:
    app = app_for(world)
    run = driver(app, world, select="a_insert", keys=("u",), until=shows(ReviewScreen))
    assert snap_compare(app, terminal_size=NARROW, run_before=run)


@pytest.fixture
def vault_edit(world: Seeded) -> Iterator[None]:
    """A person rewrote the line #a_insert added: the review must refuse, saying why."""
    path = world.vault / "drafts" / "Agent scratch.md"
    original = path.read_bytes()
    path.write_bytes(original.replace(b"expired refresh token cache", b"expired cache (person's wording)"))
    yield
    path.write_bytes(original)


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "160x48"])
def test_settings_screen(snap_compare: Any, world: Seeded, size: tuple[int, int]) -> None:
    app = app_for(world)
    assert snap_compare(
        app, terminal_size=size, run_before=driver(app, world, keys=("s",), until=shows(SettingsScreen))
    )


def test_help_screen(snap_compare: Any, world: Seeded) -> None:
    app = app_for(world)
    run = driver(app, world, keys=("question_mark",), until=lambda a: type(a.screen).__name__ == "HelpScreen")
    assert snap_compare(app, terminal_size=NARROW, run_before=run)


def test_note_and_reads_screens(snap_compare: Any, world: Seeded) -> None:
    app = app_for(world)
    run = driver(app, world, select="a_insert", keys=("o",), until=shows(NoteScreen))
    assert snap_compare(app, terminal_size=NARROW, run_before=run)
    app = app_for(world)
    run = driver(app, world, select="a_append", keys=("r",), until=shows(ReadsScreen))
    assert snap_compare(app, terminal_size=NARROW, run_before=run)


def test_snapshots_do_not_depend_on_the_local_zone() -> None:
    assert os.environ["TZ"] == "UTC" and time.strftime("%H:%M", time.localtime(0)) == "00:00"
