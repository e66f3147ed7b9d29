"""The watcher's daily copy of the database waits for the vault's files to be still: started with the first
batch of changes, a new service's first copy ran under the agent's first writes (up to 55 ms more for a few of
them, and bench_mcp's appends slower while it ran)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import apsw

from server.index.indexer import index_vault
from server.index.watcher import watch_vaults
from server.store.backup import list_backups
from server.vault.registry import add_vault


def test_no_copy_while_notes_change_one_soon_after_they_stop(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    root = tmp_path / "v"
    root.mkdir()
    (root / "busy.md").write_text("# busy\n")
    index_vault(conn, add_vault(conn, root, "v"))
    stop = threading.Event()
    watcher = threading.Thread(
        target=watch_vaults, args=(db_path,), kwargs={"stop": stop, "backup_quiet_s": 1.5}, daemon=True
    )
    watcher.start()
    try:
        busy_until = time.monotonic() + 4
        n = 0
        while time.monotonic() < busy_until:  # an agent writing every 0.3 s: never 1.5 s of still files
            n += 1
            (root / "busy.md").write_text(f"# busy\n\nwrite {n}\n")
            time.sleep(0.3)
            assert list_backups(db_path) == [], f"a copy began while notes changed (after write {n})"
        deadline = time.monotonic() + 30
        while not list_backups(db_path):
            assert time.monotonic() < deadline, "no copy once the files were still"
            time.sleep(0.05)
    finally:
        stop.set()
        watcher.join(30)
