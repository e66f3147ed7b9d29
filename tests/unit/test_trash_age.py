"""When a file was trashed (``server.writes.undo.trash``): a rename keeps the mtime, so the age comes from
the move (ctime, kms's record), and ``empty(older_than)`` never deletes what was trashed more recently."""

from __future__ import annotations

import os
import time
from pathlib import Path

import apsw
from support.organize import index, make_vault

from server.writes.undo.trash import empty, list_trash


def test_a_note_last_edited_long_ago_and_trashed_now_is_kept_until_it_is_old_in_the_trash(
    tmp_path: Path, conn: apsw.Connection
) -> None:
    root = index(conn, make_vault(tmp_path / "v")).root
    old = time.time() - 400 * 86400
    os.utime(root / "Other.md", (old, old))
    (root / ".trash").mkdir()
    moved_at = time.time()
    os.rename(root / "Other.md", root / ".trash/Other.md")
    (item,) = list_trash(conn)
    assert item.trashed_at >= moved_at - 1  # not the mtime, 400 days ago
    assert empty(conn, 30 * 86400) == []
    assert (root / ".trash/Other.md").exists()
    later = moved_at + 31 * 86400  # the clock a month on: now it is older than asked
    assert [t.path for t in empty(conn, 30 * 86400, now=later)] == ["Other.md"]
    assert not (root / ".trash/Other.md").exists()
