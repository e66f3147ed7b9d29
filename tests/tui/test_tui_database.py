"""The dashboard over a database it cannot use: a visible error saying what to do, no crash."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tui.app import create_app


@pytest.mark.parametrize("kind", ["not-sqlite", "folder"])
async def test_the_dashboard_shows_what_is_wrong_with_the_database(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "kms.db"
    if kind == "folder":
        db.mkdir()
    else:
        db.write_text("# a note, not a database\n" * 50)
    app = create_app(db, settings_path=tmp_path / "config.toml", clock=lambda: 1_767_261_600.0)
    async with app.run_test(size=(120, 30)) as pilot:
        messages: list[str] = []
        for _ in range(100):
            await pilot.pause()
            messages = [str(n.message) for n in app._notifications]
            if messages:
                break
            await asyncio.sleep(0.02)
        assert app.is_running
    expected = "is not a kms database" if kind == "not-sqlite" else "is a folder, not a database file"
    assert any(m.startswith("Reading the database failed: ") and expected in m for m in messages), messages
