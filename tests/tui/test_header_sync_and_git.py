"""The dashboard's top line names, after each vault, what keeps it in sync (issue 41) and its git mode (git
mode): both read from the real index's overview."""

from __future__ import annotations

import time
from pathlib import Path

from server.index.overview import overview
from server.store.db import connect
from server.vault.registry import add_vault, set_git_mode
from tui.state import DashboardState
from tui.widgets.header import TopBar


def test_the_top_line_shows_the_sync_tool_and_the_git_mode(tmp_path: Path, db_path: Path) -> None:
    root = tmp_path / "v"
    root.mkdir()
    (root / "a.md").write_text("# A\n")
    conn = connect(db_path)
    add_vault(conn, root, "v", sync_tool="syncthing")
    state = DashboardState(clock=time.time)
    state.overview = overview(conn)
    assert "v (syncthing)" in str(TopBar(state).render_text())
    set_git_mode(conn, "v", "commit")  # (the folder's git check is the CLI's, before this)
    state.overview = overview(conn)
    assert "v (syncthing · git commit)" in str(TopBar(state).render_text())
