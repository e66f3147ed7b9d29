"""The dashboard shows a rename as a diff per file and reverts it as one unit after a preview and a yes."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.dashboard import settled, wait_for
from support.mcp_session import TierSwitches, mcp_client
from support.organize import index, make_vault, vault_bytes
from support.vaults import note_id

from server.activity import provenance
from tui.app import create_app
from tui.screens.modals import ReviewScreen
from tui.widgets.detail import DetailView

ON: TierSwitches = {"write_enabled": True, "edit_enabled": True, "organize_enabled": True}


async def test_rename_diff_per_file_then_revert_as_one_unit(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    root = make_vault(tmp_path / "v")
    index(conn, root)
    before = vault_bytes(root)
    async with mcp_client(db_path, **ON) as client:
        r = await client.call_tool("kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
        inv = r.structured_content["invocationId"]
    app = create_app(db_path, settings_path=tmp_path / "config.toml", poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard to load")
        app.dashboard.feed.select(inv)
        await wait_for(
            pilot,
            lambda: (d := app.dashboard.query_one(DetailView).detail) is not None and d.invocation["id"] == inv,
            what="the detail",
        )
        text = app.dashboard.query_one(DetailView).text()
        assert "notes/Target.md → notes/Goal.md" in text and "Linker.md" in text
        assert "-title [[Target]]" in text and "+title [[Goal]]" in text
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="review modal")
        preview = app.screen.preview  # type: ignore[attr-defined]
        assert preview["canRevert"] and preview["action"] == "restore-files" and len(preview["files"]) == 4
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.last_revert, dict), what="the revert")
    assert vault_bytes(root) == before
    row = provenance.get_invocation(conn, app.last_revert["invocationId"])  # type: ignore[index]
    assert row is not None and (row["actor"], row["reverts_id"]) == ("person", inv)
