"""The dashboard's top line says a new vault is searchable while its links and tags are still being built
(issue 42): the overview it reads from the index, from a vault a kill left between its two phases."""

from __future__ import annotations

import time
from pathlib import Path

from support.cold_index import add_killed_between_phases
from support.gen_vault import generate

from server.index.indexer import index_vault
from server.index.overview import overview
from server.store.db import connect
from server.vault.registry import get_vault
from tui.state import DashboardState
from tui.widgets.header import TopBar


def test_the_top_line_shows_a_vault_searchable_but_not_complete(tmp_path: Path, db_path: Path) -> None:
    add_killed_between_phases(db_path, generate(tmp_path / "gen", notes=60), "gen")
    conn = connect(db_path)
    state = DashboardState(clock=time.time)
    state.overview = overview(conn)
    assert "gen searchable, building links and tags" in str(TopBar(state).render_text())
    index_vault(conn, get_vault(conn, "gen"))
    state.overview = overview(conn)
    assert "searchable" not in str(TopBar(state).render_text())
