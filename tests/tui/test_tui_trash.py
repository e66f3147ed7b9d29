"""The dashboard's trash screen (``t``): what agents trashed, from which session, when; a note moved
there by hand too; restore one after a yes (the revert of the agent's call: the note keeps its id),
a refused restore changes nothing. Snapshots at 80×24 and 160×48."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.dashboard import Seeded, seed_fixed, settled, wait_for

from server.config.session_contract import SessionConfig
from server.mcp.tools.dispatch import ToolRunner
from tui.app import KmsDashboard, create_app
from tui.screens.trash import ConfirmRestore, TrashScreen

SESSION = "s-trash-agent"


def trashed_world(root: Path) -> tuple[Seeded, dict[str, Any]]:
    """The dashboard's seeded world plus two trashed notes: one by an agent's ``kms_trash`` (through the
    real guard), one copied into ``.trash/`` by hand first. A file is dated by its move (its ctime, kms's
    record), not its mtime, so both read as trashed after the fixed clock, in the order they were trashed."""
    world = seed_fixed(root)
    by_hand = world.vault / ".trash" / "Home.md"  # a copy: Home.md is still in the vault
    by_hand.parent.mkdir()
    by_hand.write_bytes((world.vault / "Home.md").read_bytes())
    os.utime(by_hand, (world.now - 3 * 86400, world.now - 3 * 86400))  # an old mtime dates nothing
    from server.store.db import connect

    conn = connect(world.db_path)
    nid = conn.execute("SELECT id FROM notes WHERE path = 'inbox/Quick capture.md'").fetchall()[0][0]
    conn.close()
    config = SessionConfig.from_env(
        {"KMS_DB_PATH": str(world.db_path)},
        write_enabled=True,
        edit_enabled=True,
        organize_enabled=True,
        watch=False,
        session_id=SESSION,
    )
    runner = ToolRunner(config)
    try:
        answer, is_error = runner.call("kms_trash", {"noteId": nid})
    finally:
        runner.close()
    assert not is_error, answer
    return world, {"note_id": nid, "invocation": answer["invocationId"]}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Seeded, dict[str, Any]]:
    return trashed_world(tmp_path_factory.mktemp("tui-trash"))


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch, world: tuple[Seeded, dict[str, Any]]) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.chdir(world[0].db_path.parent)
    yield
    monkeypatch.undo()
    time.tzset()


def app_for(seeded: Seeded) -> KmsDashboard:
    return create_app(seeded.db_path, settings_path=Path("config.toml"), clock=lambda: seeded.now, poll_interval=0.05)


def trash_loaded(app: KmsDashboard) -> bool:
    return isinstance(app.screen, TrashScreen) and app.screen.loaded


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_trash_screen(snap_compare: Any, world: tuple[Seeded, dict[str, Any]], size: tuple[int, int]) -> None:
    app = app_for(world[0])

    async def run_before(pilot: Any) -> None:
        await wait_for(pilot, lambda: settled(app), what="the dashboard to settle")
        await pilot.press("t")
        await wait_for(pilot, lambda: trash_loaded(app), what="the trash")
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


async def test_restore_from_the_dashboard(tmp_path: Path) -> None:
    seeded, made = trashed_world(tmp_path / "w")
    vault = seeded.vault
    home_before = (vault / "Home.md").read_bytes()
    app = app_for(seeded)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard to load")
        await pilot.press("t")
        await wait_for(pilot, lambda: trash_loaded(app), what="the trash")
        screen = app.screen
        assert isinstance(screen, TrashScreen)
        assert [
            (t.path, by.session_id if by else None, by.invocation_id if by else None) for t, by in screen.entries
        ] == [("inbox/Quick capture.md", SESSION, made["invocation"]), ("Home.md", None, None)]
        table = screen.query_one("#trash")
        assert table.row_count == 2  # type: ignore[attr-defined]

        await pilot.press("down", "r")  # the copy trashed by hand: Home.md took its place since
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRestore), what="the confirmation")
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.last_restore is not None, what="the refusal")
        assert getattr(screen.last_restore, "kind", None) == "already-exists"
        assert (vault / "Home.md").read_bytes() == home_before and (vault / ".trash" / "Home.md").exists()

        screen.last_restore = None
        await pilot.press("up", "r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRestore), what="the confirmation")
        await pilot.press("n")  # no: nothing happens
        await pilot.pause(0.1)
        assert screen.last_restore is None and (vault / ".trash" / "inbox" / "Quick capture.md").exists()

        await pilot.press("enter")  # Enter restores too
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmRestore), what="the confirmation")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(screen.last_restore, dict), what="the restore")
        assert screen.last_restore["reverted"] == made["invocation"]  # type: ignore[index]
        await wait_for(pilot, lambda: screen.loaded and len(screen.entries) == 1, what="the reload")
        assert isinstance(app.screen, TrashScreen)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.dashboard, what="the dashboard again")

    assert (vault / "inbox" / "Quick capture.md").exists()
    assert not (vault / ".trash" / "inbox" / "Quick capture.md").exists()
    from server.store.db import connect

    conn = connect(seeded.db_path)
    try:  # the note came back with its id, and the restore is recorded as the person's revert
        assert conn.execute("SELECT id FROM notes WHERE path = 'inbox/Quick capture.md'").fetchall() == [
            (made["note_id"],)
        ]
        assert conn.execute(
            "SELECT actor, tool, reverts_id FROM tool_invocations ORDER BY id DESC LIMIT 1"
        ).fetchall() == [("person", "revert", made["invocation"])]
    finally:
        conn.close()
