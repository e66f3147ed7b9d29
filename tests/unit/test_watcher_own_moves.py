"""The watcher and kms's own multi-file changes: a rename kms made costs it a stat and a hash per file,
never a scan of the vault; a person's rename is still followed by one (keeping the note's id)."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
from support.organize import assert_index_is_fresh, index, make_vault


def _runner(db: Path, tmp: Path):
    from server.config.session_contract import SessionConfig
    from server.mcp.tools.dispatch import ToolRunner

    cfg = SessionConfig.from_env(
        {"KMS_DB_PATH": str(db), "KMS_CONFIG": str(tmp / "c.toml")},
        watch=False,
        enabled=True,
        read_enabled=True,
        write_enabled=True,
        edit_enabled=True,
        organize_enabled=True,
    )
    return ToolRunner(cfg)


def test_the_watcher_takes_in_a_kms_rename_without_scanning_the_vault(
    tmp_path: Path, conn: apsw.Connection, db_path: Path
) -> None:
    from server.index.watcher import apply_changes
    from server.vault.registry import get_vault

    root = make_vault(tmp_path / "v")
    index(conn, root)
    nid = conn.execute("SELECT id FROM notes WHERE path = 'notes/Target.md'").fetchall()[0][0]
    runner = _runner(db_path, tmp_path)
    try:
        out, is_error = runner.call("kms_rename", {"noteId": nid, "title": "Goal"})
    finally:
        runner.close()
    assert not is_error, out
    (root / "Stray.md").write_text("# Stray\n\ndropped in, no event for it\n")  # only a scan would find it
    events = {str(root / p) for p in ("notes/Target.md", "notes/Goal.md", "Linker.md", "Crlf.md", "private/Secret.md")}
    events |= {str(root / "notes" / ".kms-0123456789abcdef.tmp")}  # kms's temp file, gone since
    assert apply_changes(conn, [get_vault(conn, "v")], events) == 5
    assert conn.execute("SELECT count(*) FROM notes WHERE path = 'Stray.md'").fetchall() == [(0,)]
    assert conn.execute("SELECT path FROM notes WHERE id = ?", (nid,)).fetchall() == [("notes/Goal.md",)]
    (root / "Stray.md").unlink()
    assert_index_is_fresh(conn, root, tmp_path)


def test_a_persons_rename_is_still_followed_by_a_scan_and_keeps_the_id(tmp_path: Path, conn: apsw.Connection) -> None:
    from server.index.watcher import apply_changes
    from server.vault.registry import get_vault

    root = make_vault(tmp_path / "v")
    index(conn, root)
    nid = conn.execute("SELECT id FROM notes WHERE path = 'drafts/Draft.md'").fetchall()[0][0]
    os.rename(root / "drafts/Draft.md", root / "drafts/Renamed.md")
    apply_changes(conn, [get_vault(conn, "v")], {str(root / "drafts/Draft.md"), str(root / "drafts/Renamed.md")})
    assert conn.execute("SELECT path FROM notes WHERE id = ?", (nid,)).fetchall() == [("drafts/Renamed.md",)]
    assert_index_is_fresh(conn, root, tmp_path)


def test_a_change_made_before_the_watch_was_set_up_is_taken_in(
    tmp_path: Path, conn: apsw.Connection, db_path: Path
) -> None:
    """A file system watch reports only what happens after it is set up: an edit made while no watcher ran
    (or in the moment a server takes to start) is found by the scan the watcher makes once it watches."""
    import threading
    import time

    from server.index.watcher import watch_vaults

    root = make_vault(tmp_path / "v")
    index(conn, root)
    (root / "drafts" / "Draft.md").write_text("# Draft\n\nedited while nothing watched: catchupword\n")
    (root / "Stray.md").write_text("# Stray\n\nadded while nothing watched\n")
    stop = threading.Event()
    watcher = threading.Thread(target=watch_vaults, args=(db_path,), kwargs={"stop": stop}, daemon=True)
    watcher.start()
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            found = conn.execute(
                "SELECT count(*) FROM notes WHERE path = 'Stray.md' OR "
                "(path = 'drafts/Draft.md' AND body LIKE '%catchupword%')"
            ).fetchall()[0][0]
            if found == 2:
                break
            time.sleep(0.05)
        assert found == 2, "the watcher never took in what changed before it watched"
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert_index_is_fresh(conn, root, tmp_path)
