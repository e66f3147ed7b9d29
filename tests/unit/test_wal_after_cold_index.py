"""After a cold index the WAL file stayed as large as the database (220 MB for 20k notes): a bulk index now
checkpoints and truncates it, and every connection caps what a reset WAL keeps (``journal_size_limit``)."""

from __future__ import annotations

from pathlib import Path

import apsw

from server.index.indexer import BULK_NOTES, index_all
from server.store.db import WAL_SIZE_LIMIT
from server.vault.registry import add_vault


def test_a_cold_index_leaves_no_large_wal(tmp_path: Path, conn: apsw.Connection, db_path: Path) -> None:
    root = tmp_path / "big"
    root.mkdir()
    for n in range(BULK_NOTES + 50):
        (root / f"note {n}.md").write_text(f"# Note {n}\n\n" + f"words of note {n} and #tag{n % 7}\n" * 40)
    add_vault(conn, root, "big")
    [report] = index_all(conn)
    assert report.added == BULK_NOTES + 50
    wal = Path(f"{db_path}-wal")
    assert not wal.exists() or wal.stat().st_size < 1024 * 1024, wal.stat().st_size
    assert conn.execute("PRAGMA journal_size_limit").fetchall()[0][0] == WAL_SIZE_LIMIT
