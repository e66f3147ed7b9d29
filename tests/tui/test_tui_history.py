"""A note's history in the dashboard (issue 28): ``h`` on a feed row and in the trash lists every version
kms kept with who made it, shows the diff against the note now, and restores one after a yes (recorded as
the person's); a no changes nothing, a save since the diff is refused (``conflict``) and left as it is."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.dashboard import settled, wait_for
from support.sql import value
from test_tui_trash import app_for, trashed_world

from server.index.incremental import reindex_file
from server.store.db import connect
from server.vault.registry import get_vault
from tui.app import KmsDashboard
from tui.screens.note_history import ConfirmVersionRestore, HistoryScreen
from tui.screens.trash import TrashScreen


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def history_loaded(app: KmsDashboard) -> bool:
    screen = app.screen
    return isinstance(screen, HistoryScreen) and screen.loaded


async def test_history_from_the_feed_diff_and_restore_after_a_yes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded, _made = trashed_world(tmp_path / "w")
    monkeypatch.chdir(seeded.db_path.parent)
    home = seeded.vault / "Home.md"
    first = home.read_bytes()
    conn = connect(seeded.db_path)
    home.write_bytes(first + b"a save in the editor\n")
    reindex_file(conn, get_vault(conn, value(conn, "SELECT name FROM vaults")), "Home.md")
    note_id = value(conn, "SELECT id FROM notes WHERE path = 'Home.md'")
    conn.close()
    app = app_for(seeded)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard to load")
        app.show_history(note_id)  # what ``h`` does for a feed row about this note
        await wait_for(pilot, lambda: history_loaded(app), what="the history")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        assert [v["version"] for v in screen.versions][:2] == [len(screen.versions), len(screen.versions) - 1]
        assert screen.versions[0]["who"]["by"] == "outside kms"
        await pilot.press("down")  # the version before the editor's save
        older = screen.versions[1]["version"]
        await wait_for(pilot, lambda: screen.shown == older, what="its diff")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmVersionRestore), what="the confirmation")
        confirm = app.screen
        assert isinstance(confirm, ConfirmVersionRestore) and "-a save in the editor" in confirm.plan["diff"]
        await pilot.press("n")
        await pilot.pause(0.1)
        assert screen.last_restore is None and home.read_bytes().endswith(b"a save in the editor\n")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmVersionRestore), what="the confirmation")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(screen.last_restore, dict), what="the restore")
        assert home.read_bytes() == first
        await wait_for(pilot, lambda: screen.loaded and screen.versions[0]["who"]["how"] == "restore", what="reload")

        screen.last_restore = None
        await pilot.press("down", "r")  # a save lands between the diff shown and the yes
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmVersionRestore), what="the confirmation")
        home.write_bytes(b"saved meanwhile\n")
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.last_restore is not None, what="the refusal")
        assert getattr(screen.last_restore, "kind", None) == "conflict"
        assert home.read_bytes() == b"saved meanwhile\n"


async def test_history_from_the_trash_brings_a_deleted_note_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded, made = trashed_world(tmp_path / "w")
    monkeypatch.chdir(seeded.db_path.parent)
    app = app_for(seeded)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard to load")
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, TrashScreen) and app.screen.loaded, what="the trash")
        await pilot.press("h")  # the agent's trashed note is the first row
        await wait_for(pilot, lambda: history_loaded(app), what="the history")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        assert screen.versions[0]["how"] == "deleted"
        assert screen.versions[0]["who"] == {
            "by": "agent",
            "how": "kms_trash",
            "sessionId": "s-trash-agent",
            "invocationId": made["invocation"],
        }
        await pilot.press("down", "r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmVersionRestore), what="the confirmation")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(screen.last_restore, dict), what="the restore")
    note = seeded.vault / "inbox" / "Quick capture.md"
    assert note.read_bytes() == (seeded.vault / ".trash" / "inbox" / "Quick capture.md").read_bytes()
