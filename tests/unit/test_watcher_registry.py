"""A running watcher follows the vault registry (``watch_vaults``, as ``kms mcp``, ``kms watch`` and the service
run it): a vault registered after it started is watched, one removed is dropped, and a watcher started with
no vault at all waits for one instead of ending."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from support.vaults import index_notes, write
from support.waiting import idles_in, until

from server.index.indexer import index_vault, remove_vault
from server.index.watcher import watch_vaults
from server.vault.registry import add_vault


@pytest.fixture
def watching(db_path: Path, conn: apsw.Connection) -> Iterator[threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=watch_vaults, args=(db_path,), kwargs={"stop": stop}, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()


def wait_indexed(conn: apsw.Connection, path: str, timeout: float = 15.0) -> float:
    """Seconds until a note at ``path`` is in the index (fails after ``timeout``)."""
    began = time.monotonic()
    while not conn.execute("SELECT 1 FROM notes WHERE path = ?", (path,)).fetchall():
        assert time.monotonic() - began < timeout, f"{path} was never indexed"
        time.sleep(0.05)
    return time.monotonic() - began


def test_a_watcher_started_with_no_vault_watches_the_first_one_added(
    conn: apsw.Connection, tmp_path: Path, watching: threading.Thread
) -> None:
    # the watcher has looked at the empty registry at least once (it used to end there): it idles in its loop
    until(lambda: idles_in(watching, "watch_vaults", "server/index/watcher.py"), what="the watcher idling")
    assert watching.is_alive()
    root = tmp_path / "late"
    root.mkdir()
    index_vault(conn, add_vault(conn, root, "late"))
    write(root / "Later.md", "# Later\n\nwritten after the vault was added\n")
    assert wait_indexed(conn, "Later.md") < 15


def test_a_vault_removed_while_watched_is_dropped_and_one_added_is_watched(
    conn: apsw.Connection, tmp_path: Path, watching: threading.Thread
) -> None:
    index_notes(conn, tmp_path / "a", {"A.md": "# A\n"}, name="a")
    write(tmp_path / "a" / "A2.md", "# A2\n")
    wait_indexed(conn, "A2.md")  # the watcher watches "a"
    index_notes(conn, tmp_path / "b", {"B.md": "# B\n"}, name="b")
    write(tmp_path / "b" / "B2.md", "# B2\n")
    print(f"a vault added while watched: its new note indexed in {wait_indexed(conn, 'B2.md'):.2f} s")
    remove_vault(conn, "a")
    write(tmp_path / "a" / "A3.md", "# A3\n")
    write(tmp_path / "b" / "B3.md", "# B3\n")
    wait_indexed(conn, "B3.md")  # written after A3.md: the watcher has seen both
    assert conn.execute("SELECT count(*) FROM notes WHERE path LIKE 'A%'").fetchall() == [(0,)]
    assert watching.is_alive()
