"""A full disk under the database during a change of several files (a rename rewriting its linking
notes, a move, a trash, a batch of creates, a revert's restore): the call answers ``disk-full``, every file
is put back as kms read it (so the vault and the index agree, and nothing is half renamed), the refusal
waits beside the database, and the same call works once there is room."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from support.organize import assert_index_is_fresh, index, make_vault, organize_runner, vault_bytes
from support.sql import tuples, value
from support.vaults import note_id

from server.activity import unrecorded
from server.mcp.tools.dispatch import ToolRunner
from server.store.db import thread_connection


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    """The organise vault plus a long linking note (and a long note): re-indexing them needs pages that a
    full disk has not."""
    root = make_vault(tmp_path / "v")
    words = " ".join(f"word{i}" for i in range(8_000))
    (root / "Long.md").write_text(f"# Long\n\nsee [[Target]], [[notes/Target|by path]]\n\n{words}\n", encoding="utf-8")
    with open(root / "notes/Target.md", "a", encoding="utf-8") as f:  # its own rows are long too
        f.write(f"\n{words}\n")
    index(conn, root)
    return root


@pytest.fixture
def runner(db_path: Path, vault: Path) -> Iterator[ToolRunner]:
    with organize_runner(db_path) as r:
        yield r


def disk_full(db_path: Path) -> int:
    """What a full disk looks like to SQLite, on the write path's own connection; returns the page count."""
    conn = thread_connection(db_path)
    conn.execute("PRAGMA freelist_count")
    conn.execute("VACUUM")  # no free page left inside the file either
    pages = value(conn, "PRAGMA page_count")
    conn.execute(f"PRAGMA max_page_count = {pages}")
    return pages


def room_again(db_path: Path, pages: int) -> None:
    thread_connection(db_path).execute(f"PRAGMA max_page_count = {pages * 100}")


CALLS = [
    ("kms_rename", lambda nid: {"noteId": nid, "title": "Goal"}, "notes/Goal.md"),
    ("kms_move", lambda nid: {"noteId": nid, "folder": "archive"}, "archive/Target.md"),
    ("kms_trash", lambda nid: {"noteId": nid}, ".trash/notes/Target.md"),
]


@pytest.mark.parametrize(("tool", "args", "lands"), CALLS, ids=[c[0] for c in CALLS])
def test_a_multi_file_change_the_database_cannot_record_changes_no_file(
    tool: str, args, lands: str, runner: ToolRunner, vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    nid = note_id(conn, "Target")
    before = vault_bytes(vault)
    pages = disk_full(db_path)
    answer, is_error = runner.call(tool, args(nid))
    assert is_error and answer["error"] == "disk-full", answer
    assert vault_bytes(vault) == before  # every linking note and the note itself, back as they were
    assert not (vault / lands).exists()
    assert conn.execute("SELECT path FROM notes WHERE id = ?", (nid,)).fetchall() == [("notes/Target.md",)]
    assert_index_is_fresh(conn, vault, tmp_path)
    assert unrecorded.waiting(db_path) == 1
    room_again(db_path, pages)
    answer, is_error = runner.call(tool, args(nid))
    assert not is_error, answer
    assert (vault / lands).exists() and not (vault / "notes/Target.md").exists()
    assert unrecorded.waiting(db_path) == 0
    rows = tuples(conn, "SELECT status, error, message FROM tool_invocations WHERE tool = ? ORDER BY id", (tool,))
    assert [(s, e) for s, e, _m in rows] == [("error", "disk-full"), ("success", None)]
    assert "left as it was" in rows[0][2]


def test_a_save_after_the_change_is_never_put_back_over(vault: Path, conn: apsw.Connection, db_path: Path) -> None:
    """The put-back is a compare-and-swap: a linking note a person saved after kms rewrote it keeps the
    person's bytes (the others go back). The database fails for real (no room) after the rename."""
    from server.writes.context import WriteContext, load_note, undone_unless_recorded
    from server.writes.organize import rename

    note, v = load_note(conn, note_id(conn, "Target"))
    before = vault_bytes(vault)
    saved = b"# Crlf\r\n\r\nthe person's own save\r\n"
    pages = disk_full(db_path)
    room_again(db_path, pages)
    ctx = WriteContext.for_person(conn)
    with pytest.raises(apsw.FullError), undone_unless_recorded(ctx):
        out = rename(ctx, v, note, title="Goal")
        assert (vault / "notes/Goal.md").exists() and not out.result.get("indexWarning")
        (vault / "Crlf.md").write_bytes(saved)  # the person's editor saves the rewritten linking note
        conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchall()[0][0]}")
        conn.execute("CREATE TABLE filler(x)")
        conn.execute("INSERT INTO filler VALUES (zeroblob(1000000))")  # the record that finds no room
    after = vault_bytes(vault)
    assert after.pop("Crlf.md") == saved
    assert after == {k: v for k, v in before.items() if k != "Crlf.md"}


def test_a_batch_and_an_edit_the_database_cannot_record_change_nothing(
    runner: ToolRunner, vault: Path, conn: apsw.Connection, db_path: Path
) -> None:
    nid = note_id(conn, "Draft")
    version = runner.call("kms_read", {"noteId": nid})[0]["version"]
    before = vault_bytes(vault)
    disk_full(db_path)
    answer, is_error = runner.call(
        "kms_create_many",
        {"notes": [{"title": f"Batch {i}", "folder": "drafts", "content": "z" * 20_000} for i in range(3)]},
    )
    assert is_error and answer["error"] == "disk-full", answer
    answer, is_error = runner.call(
        "kms_edit",
        {"noteId": nid, "version": version, "edits": [{"replace": {"old": "first line", "new": "y" * 40_000}}]},
    )
    assert is_error and answer["error"] == "disk-full", answer
    assert vault_bytes(vault) == before


def test_a_revert_the_database_cannot_record_changes_no_file(
    runner: ToolRunner, vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """The person's revert (dashboard, ``kms revert``) of a rename: refused as a whole on a full disk."""
    from server.writes.undo.revert import revert

    answer, is_error = runner.call("kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
    assert not is_error, answer
    renamed = vault_bytes(vault)
    conn.execute("VACUUM")
    pages = value(conn, "PRAGMA page_count")
    conn.execute(f"PRAGMA max_page_count = {pages}")  # the person's own connection this time
    with pytest.raises(apsw.FullError):
        revert(conn, answer["invocationId"])
    assert vault_bytes(vault) == renamed  # still the rename, every file of it
    assert_index_is_fresh(conn, vault, tmp_path)
    conn.execute(f"PRAGMA max_page_count = {pages * 100}")
    assert revert(conn, answer["invocationId"])["reverted"] == answer["invocationId"]
    assert (vault / "notes/Target.md").exists() and not (vault / "notes/Goal.md").exists()
