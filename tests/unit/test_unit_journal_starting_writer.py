"""A unit's writer creates its journal (``.writing``) a moment before it locks it; another process's
``recover`` in that moment must not take it for a dead writer's and remove it (the writer's rename then
failed: ``kms_rename`` answered ``internal`` when several hosts wrote at once, tests/e2e/test_host_entries_e2e.py)."""

from __future__ import annotations

import os
from pathlib import Path

import apsw

from server.writes.unit_journal import WRITING, WRITING_AGE_S, journal_dir, recover


def test_a_young_unlocked_journal_is_a_starting_writers_and_stays(tmp_path: Path, conn: apsw.Connection) -> None:
    locks = tmp_path / "locks"
    folder = journal_dir(locks)
    folder.mkdir(parents=True)
    starting = folder / f"0123456789abcdef01234567{WRITING}"
    starting.write_bytes(b"")  # created (O_EXCL), not yet locked nor written: what begin() holds for a moment
    assert recover(conn, locks) == 0
    assert starting.exists()
    old = os.stat(starting).st_mtime - WRITING_AGE_S - 1
    os.utime(starting, (old, old))  # a writer that died right there, a while ago
    assert recover(conn, locks) == 0
    assert not starting.exists()


def test_an_unlocked_journal_with_bytes_is_a_dead_writers_and_goes_at_once(
    tmp_path: Path, conn: apsw.Connection
) -> None:
    """A writer writes only once it holds the lock: bytes in an unlocked journal mean it died writing."""
    locks = tmp_path / "locks"
    folder = journal_dir(locks)
    folder.mkdir(parents=True)
    cut = folder / f"0123456789abcdef01234567{WRITING}"
    cut.write_bytes(b"KMSUNIT")
    assert recover(conn, locks) == 0
    assert not cut.exists()
