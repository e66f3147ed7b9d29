"""The dashboard's top bar names what keeps each vault in sync and counts the open conflicts (a sync tool's
conflict copy), and the count follows the files: a real vault, a real index, the real app."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.dashboard import settled, wait_for

from server.index.indexer import index_vault
from server.vault.registry import add_vault
from tui.app import create_app


async def test_top_bar_shows_sync_and_open_conflicts(conn: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    root = tmp_path / "v"
    (root / ".stfolder").mkdir(parents=True)  # a Syncthing folder
    (root / "Plan.md").write_text("# Plan\nmine\n", encoding="utf-8")
    vault = add_vault(conn, root, "v")
    index_vault(conn, vault)
    app = create_app(db_path, settings_path=tmp_path / "config.toml", poll_interval=0.05)

    def top() -> str:
        return str(app.dashboard.query_one("#topbar").render_text())  # type: ignore[attr-defined]

    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard to load")
        assert "v (syncthing)" in top() and "conflict" not in top()
        (root / "Plan.sync-conflict-20261201-101500-ABCDEFG.md").write_text("# Plan\ntheirs\n", encoding="utf-8")
        index_vault(conn, vault)
        await wait_for(pilot, lambda: "⚠ 1 conflict" in top(), what="the conflict in the top bar")


async def test_conflicts_screen_shows_the_diff_and_keeps_theirs(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from tui.screens.conflicts import ConfirmKeep, ConflictsScreen

    root = tmp_path / "v"
    root.mkdir()
    (root / "Plan.md").write_text("# Plan\nmine\n", encoding="utf-8")
    (root / "Plan (conflicted copy 2026-12-01).md").write_text("# Plan\ntheirs\n", encoding="utf-8")
    index_vault(conn, add_vault(conn, root, "v"))
    app = create_app(db_path, settings_path=tmp_path / "config.toml", poll_interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard to load")
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConflictsScreen) and app.screen.loaded, what="the list")
        screen = app.screen
        assert isinstance(screen, ConflictsScreen) and [c["source"] for c in screen.items] == ["dropbox"]
        assert "-mine\n+theirs\n" in screen.diff
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmKeep), what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.last is not None and screen.items == [], what="the resolution")
    assert (root / "Plan.md").read_text() == "# Plan\ntheirs\n"
    assert not (root / "Plan (conflicted copy 2026-12-01).md").exists()
