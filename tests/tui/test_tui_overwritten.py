"""The dashboard shows an agent write that a later save dropped: the feed's status turns to
``↯ overwritten`` while it is open, and the detail pane says when."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
from support.dashboard import settled, wait_for
from support.mcp_session import mcp_client
from support.vaults import note_id

from server.activity import overwrites
from server.index.watcher import apply_changes
from server.vault.registry import list_vaults
from tui.app import create_app
from tui.widgets.detail import DetailView


async def test_feed_and_detail_show_an_overwritten_write(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, tmp_path: Path
) -> None:
    path = vault_dir / "inbox" / "Quick capture.md"
    old = path.read_text(encoding="utf-8")  # an editor's buffer from before the agent wrote
    async with mcp_client(db_path, write_enabled=True) as client:
        r = await client.call_tool(
            "kms_append", {"noteId": note_id(indexed, "Quick capture"), "content": "- the agent's line"}
        )
        assert not r.is_error, r.structured_content
        inv = r.structured_content["invocationId"]
    app = create_app(db_path, settings_path=tmp_path / "config.toml", poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard to load")
        feed = app.dashboard.feed
        assert str(feed.get_cell(str(inv), "status")) == "✓ ok"
        feed.select(inv)
        await wait_for(
            pilot,
            lambda: (d := app.dashboard.query_one(DetailView).detail) is not None and d.invocation["id"] == inv,
            what="the detail",
        )

        tmp = path.with_name(".Quick capture.md.swp")  # the person saves the old buffer by rename
        tmp.write_text(old + "- the person's line\n", encoding="utf-8")
        os.replace(tmp, path)
        apply_changes(indexed, list_vaults(indexed), {str(tmp), str(path)}, after=overwrites.check)

        await wait_for(pilot, lambda: str(feed.get_cell(str(inv), "status")) == "↯ overwritten", what="the status")
        await wait_for(
            pilot, lambda: "Overwritten" in app.dashboard.query_one(DetailView).text(), what="the detail to say so"
        )
        text = app.dashboard.query_one(DetailView).text()
        assert "a later save of the note dropped the text this call wrote" in text
