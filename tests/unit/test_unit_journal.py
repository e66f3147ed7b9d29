"""The write-ahead journal of a unit rewritten in place: what ``recover`` does with each state a dead
writer can leave (real files, a real database, real ``flock``s)."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from server.store.db import write_tx
from server.writes.unit_journal import KEPT, WRITING, Entry, UnitJournal, journal_dir, kept, kept_calls, recover

OLD = b"# Note\n\n" + b"old line [[Target]]\n" * 600  # several 4 KiB blocks
NEW = OLD.replace(b"[[Target]]", b"[[Goal]]")


@pytest.fixture
def locks(tmp_path: Path) -> Path:
    return tmp_path / "state" / "locks"


def dead_writer(locks: Path, entries: list[Entry]) -> UnitJournal:
    """A journal whose writer died: flushed, its lock let go."""
    journal = UnitJournal.begin(journal_dir(locks), entries)
    journal.release()
    return journal


def test_a_torn_note_gets_its_old_bytes_back(tmp_path: Path, conn: apsw.Connection, locks: Path) -> None:
    torn, cut, whole, untouched = (tmp_path / f"{n}.md" for n in ("torn", "cut", "whole", "untouched"))
    torn.write_bytes(NEW[:4096] + OLD[4096:])  # the crash came between two pages of the write
    cut.write_bytes(NEW[:5000] + OLD[5000:])  # the write stopped inside a page
    whole.write_bytes(NEW)
    untouched.write_bytes(OLD)
    journal = dead_writer(locks, [Entry(str(p), OLD, NEW) for p in (torn, cut, whole, untouched)])
    assert recover(conn, locks) == 1
    assert [p.read_bytes() for p in (torn, cut, whole, untouched)] == [OLD] * 4
    assert not journal.path.exists() and kept(locks) == []


def test_a_note_a_person_saved_since_is_left_and_the_journal_kept(
    tmp_path: Path, conn: apsw.Connection, locks: Path
) -> None:
    mine, theirs, typed = tmp_path / "mine.md", tmp_path / "theirs.md", tmp_path / "typed.md"
    mine.write_bytes(NEW)
    theirs.write_bytes(b"the person's own text\n")
    typed.write_bytes(OLD[:100] + b"XYZ" + OLD[103:])  # three letters typed over, in place
    journal = dead_writer(locks, [Entry(str(p), OLD, NEW) for p in (mine, theirs, typed)])
    recover(conn, locks)
    assert mine.read_bytes() == OLD and theirs.read_bytes() == b"the person's own text\n"
    assert typed.read_bytes() == OLD[:100] + b"XYZ" + OLD[103:]
    assert kept(locks) == [
        {"journal": str(journal.path.with_suffix(KEPT)), "notes": [str(mine), str(theirs), str(typed)]}
    ]
    assert recover(conn, locks) == 0  # a kept journal is the person's to look at, never replayed


def test_a_live_units_journal_is_left_alone(tmp_path: Path, conn: apsw.Connection, locks: Path) -> None:
    note = tmp_path / "n.md"
    note.write_bytes(NEW)
    journal = UnitJournal.begin(journal_dir(locks), [Entry(str(note), OLD, NEW)])  # its writer still holds it
    assert recover(conn, locks) == 0
    assert note.read_bytes() == NEW and journal.path.exists()
    journal.end()
    assert not journal.path.exists()


def test_a_journal_cut_short_touched_nothing_and_goes(tmp_path: Path, conn: apsw.Connection, locks: Path) -> None:
    note = tmp_path / "n.md"
    note.write_bytes(OLD)
    journal = dead_writer(locks, [Entry(str(note), OLD, NEW)])
    data = journal.path.read_bytes()
    writing = journal.path.with_suffix(WRITING)
    journal.path.rename(writing)
    writing.write_bytes(data[: len(data) // 2])  # the writer died while writing its journal
    assert recover(conn, locks) == 0
    assert note.read_bytes() == OLD and list(journal_dir(locks).iterdir()) == []


def test_a_damaged_journal_is_kept_and_its_notes_left(tmp_path: Path, conn: apsw.Connection, locks: Path) -> None:
    note = tmp_path / "n.md"
    note.write_bytes(NEW)
    journal = dead_writer(locks, [Entry(str(note), OLD, NEW)])
    data = bytearray(journal.path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a bit flipped on the disk
    journal.path.write_bytes(bytes(data))
    assert recover(conn, locks) == 1
    assert note.read_bytes() == NEW and kept(locks) == [{"journal": str(journal.path.with_suffix(KEPT)), "notes": []}]


def test_a_recorded_unit_stays_done(tmp_path: Path, conn: apsw.Connection, locks: Path) -> None:
    note = tmp_path / "n.md"
    note.write_bytes(NEW)
    journal = UnitJournal.begin(journal_dir(locks), [Entry(str(note), OLD, NEW)])
    with write_tx(conn):
        journal.mark_applied(conn)  # committed with the unit; then the writer died before its journal went
    journal.release()
    assert recover(conn, locks) == 1
    assert note.read_bytes() == NEW and not journal.path.exists()
    assert conn.execute("SELECT count(*) FROM applied_units").fetchall() == [(0,)]


def test_a_moved_note_goes_back_and_a_deleted_one_comes_back(
    tmp_path: Path, conn: apsw.Connection, locks: Path
) -> None:
    source, dest, deleted = tmp_path / "a" / "Target.md", tmp_path / "b" / "Goal.md", tmp_path / "Gone.md"
    dest.parent.mkdir()
    dest.write_bytes(NEW)  # created at its new path; the source was removed; then death
    dead_writer(locks, [Entry(str(source), OLD, NEW, dest=str(dest)), Entry(str(deleted), OLD, b"", deleted=True)])
    assert recover(conn, locks) == 1
    assert source.read_bytes() == OLD and not dest.exists() and deleted.read_bytes() == OLD


def test_a_moved_note_a_person_edited_at_its_new_path_stays_there(
    tmp_path: Path, conn: apsw.Connection, locks: Path
) -> None:
    source, dest = tmp_path / "Target.md", tmp_path / "Goal.md"
    dest.write_bytes(b"edited by the person at its new name\n")
    dead_writer(locks, [Entry(str(source), OLD, NEW, dest=str(dest))])
    recover(conn, locks)
    assert not source.exists() and dest.read_bytes() == b"edited by the person at its new name\n"
    assert len(kept(locks)) == 1


def test_stale_applied_rows_go_with_the_next_unit(tmp_path: Path, conn: apsw.Connection, locks: Path) -> None:
    conn.execute("INSERT INTO applied_units VALUES ('gone-long-ago', 0)")
    journal = UnitJournal.begin(journal_dir(locks), [Entry(str(tmp_path / "n.md"), OLD, NEW)])
    with write_tx(conn):
        journal.mark_applied(conn)
    journal.end()
    assert conn.execute("SELECT token FROM applied_units").fetchall() == [(journal.token,)]


def test_a_note_a_dead_keyed_call_created_goes_unless_a_person_wrote_into_it(
    tmp_path: Path, conn: apsw.Connection, locks: Path
) -> None:
    """A create is undone by removing the note, only while it holds kms's bytes; never made: nothing to do."""
    made, written, never = tmp_path / "made.md", tmp_path / "written.md", tmp_path / "never.md"
    made.write_bytes(b"# Made\n")
    written.write_bytes(b"# Written\nthe person's line\n")
    dead_writer(locks, [Entry(str(made), b"", b"# Made\n", created=True)])
    dead_writer(locks, [Entry(str(never), b"", b"# Never\n", created=True)])
    assert recover(conn, locks) == 2
    assert not made.exists() and not never.exists() and journal_dir(locks).exists()
    assert list(journal_dir(locks).iterdir()) == []
    kept_one = UnitJournal.begin(journal_dir(locks), [Entry(str(written), b"", b"# Written\n", created=True)], "c1")
    kept_one.release()
    assert recover(conn, locks) == 1
    assert written.read_bytes() == b"# Written\nthe person's line\n"  # the person's: it stays
    assert kept_calls(locks) == {"c1"}  # its retry is refused (``server.writes.once``)


def test_a_journal_written_before_creates_were_journaled_is_still_read(
    tmp_path: Path, conn: apsw.Connection, locks: Path
) -> None:
    """A journal of an older kms (no ``created``, no call) left by a crash before an upgrade is undone."""
    import hashlib
    import json

    note = tmp_path / "n.md"
    note.write_bytes(NEW)
    header = json.dumps({"token": "t0", "files": [[str(note), len(OLD), len(NEW), None, False]]}).encode()
    body = b"KMSUNIT1\n" + len(header).to_bytes(8, "big") + header + OLD + NEW
    journal_dir(locks).mkdir(parents=True)
    (journal_dir(locks) / "t0.unit").write_bytes(body + hashlib.sha256(body).digest())
    assert recover(conn, locks) == 1
    assert note.read_bytes() == OLD and kept_calls(locks) == set()
