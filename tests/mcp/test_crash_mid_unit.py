"""A server killed (SIGKILL) in the middle of a rename that rewrites its linking notes in place: the
unit's journal undoes it as a whole at the next write call, and a server killed right after the unit
was recorded leaves it done. Real processes die here; the next call is a real ``ToolRunner``."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from support.organize import assert_index_is_fresh, index, make_vault, organize_runner, vault_bytes
from support.vaults import note_id

from server.mcp.tools.dispatch import ToolRunner

DIE = """
import os, signal, sys
from server.config.session_contract import SessionConfig
from server.mcp.tools.dispatch import ToolRunner
from server.writes import multifile, unit_journal

db, where, nid = sys.argv[1], sys.argv[2], sys.argv[3]
def die():
    os.kill(os.getpid(), signal.SIGKILL)  # no finally, no cleanup: a crash
if where == "mid-unit":
    real, seen = multifile._write_in_place, []
    def write_then_die(prep, done):
        real(prep, done)
        seen.append(prep)
        if len(seen) == 2:
            die()
    multifile._write_in_place = write_then_die
else:  # right after the commit that recorded the unit, before its journal goes
    unit_journal.UnitJournal.end = lambda self: die()
config = SessionConfig.from_env({"KMS_DB_PATH": db}, write_enabled=True, edit_enabled=True, organize_enabled=True,
                                watch=False)
print(ToolRunner(config).call("kms_rename", {"noteId": nid, "title": "Goal"}))
"""


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    root = make_vault(tmp_path / "v")
    index(conn, root)
    return root


@pytest.fixture
def runner(db_path: Path, vault: Path) -> Iterator[ToolRunner]:
    with organize_runner(db_path) as r:
        yield r


def killed(db_path: Path, where: str, nid: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-c", DIE, str(db_path), where, nid], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr


def journals(db_path: Path) -> list[str]:
    return sorted(p.name for p in (db_path.parent / "locks" / "units").iterdir())


def test_a_server_killed_in_mid_unit_is_undone_as_a_whole_at_the_next_call(
    vault: Path, conn: apsw.Connection, db_path: Path, runner: ToolRunner, tmp_path: Path
) -> None:
    nid = note_id(conn, "Target")
    before = vault_bytes(vault)
    killed(db_path, "mid-unit", nid)
    after_crash = vault_bytes(vault)
    rewritten = {p for p in before if after_crash.get(p) != before[p]}
    assert rewritten == {"notes/Target.md", "Crlf.md", "Linker.md"}  # the note moved, two linking notes
    assert "notes/Goal.md" in after_crash and "private/Secret.md" not in rewritten  # written, then death
    assert len(journals(db_path)) == 1
    answer, is_error = runner.call("kms_append", {"noteId": note_id(conn, "Other"), "content": "later"})
    assert not is_error, answer
    now = vault_bytes(vault)
    assert {p: b for p, b in now.items() if p != "Other.md"} == {p: b for p, b in before.items() if p != "Other.md"}
    assert journals(db_path) == []
    assert conn.execute("SELECT count(*) FROM tool_invocations WHERE tool = 'kms_rename'").fetchall() == [(0,)]
    assert_index_is_fresh(conn, vault, tmp_path)


def test_a_server_killed_after_the_unit_was_recorded_leaves_it_done(
    vault: Path, conn: apsw.Connection, db_path: Path, runner: ToolRunner, tmp_path: Path
) -> None:
    nid = note_id(conn, "Target")
    killed(db_path, "after-commit", nid)
    assert len(journals(db_path)) == 1
    renamed = vault_bytes(vault)
    assert "notes/Goal.md" in renamed and "[[Goal]]" in renamed["Crlf.md"].decode()
    answer, is_error = runner.call("kms_append", {"noteId": note_id(conn, "Other"), "content": "later"})
    assert not is_error, answer
    assert {p: b for p, b in vault_bytes(vault).items() if p != "Other.md"} == {
        p: b for p, b in renamed.items() if p != "Other.md"
    }
    assert journals(db_path) == []
    assert conn.execute("SELECT count(*) FROM applied_units").fetchall() == [(0,)]
    rows = conn.execute("SELECT status, change_kind FROM tool_invocations WHERE tool = 'kms_rename'").fetchall()
    assert rows == [("success", "files-changed")], rows  # recorded, so revertible
    assert_index_is_fresh(conn, vault, tmp_path)


def test_a_vault_disk_filling_up_in_mid_write_puts_every_note_back(
    vault: Path,
    conn: apsw.Connection,
    db_path: Path,
    runner: ToolRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Half of a linking note's new bytes land, then the vault's disk is full: the call answers
    ``disk-full``, that note and every one before it get their old bytes back, the journal goes."""
    from server.writes import multifile

    real, calls = multifile.write_all, []

    def fills_up(fd: int, data: bytes) -> None:
        calls.append(fd)
        if len(calls) == 2:
            os.pwrite(fd, data[: len(data) // 2], 0)
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(multifile, "write_all", fills_up)
    before = vault_bytes(vault)
    answer, is_error = runner.call("kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
    assert is_error and answer["error"] == "disk-full", answer
    assert vault_bytes(vault) == before and journals(db_path) == []
    assert_index_is_fresh(conn, vault, tmp_path)


def test_a_move_that_fails_half_way_is_taken_back(
    vault: Path,
    conn: apsw.Connection,
    db_path: Path,
    runner: ToolRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The note is made at its new path, then removing the old one fails: the new one goes again, and
    no linking note keeps a rewritten link."""
    from server.vault.files import atomic_write
    from server.writes import multifile

    def made_then_fails(real: Path, dest: Path, new_raw: bytes) -> None:
        atomic_write(dest, new_raw, create_only=True)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(multifile, "_move", made_then_fails)
    before = vault_bytes(vault)
    answer, is_error = runner.call("kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
    assert is_error and answer["error"] == "conflict" and "Input/output error" in answer["message"], answer
    assert vault_bytes(vault) == before and journals(db_path) == []
    assert_index_is_fresh(conn, vault, tmp_path)


def test_a_write_that_gets_the_lock_a_dead_unit_let_go_undoes_that_unit_first(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """The person's note was half way through a rename when its server died; the next writer of one of
    its linking notes (here an append, straight to the operation, with no guard call before it) finishes
    the dead unit before it reads the note: its text lands on the old text, the unit is undone whole."""
    from server.writes.context import WriteContext, load_note
    from server.writes.operations import append

    before = vault_bytes(vault)
    killed(db_path, "mid-unit", note_id(conn, "Target"))
    assert vault_bytes(vault)["Linker.md"] != before["Linker.md"]  # written by the dead unit
    note, v = load_note(conn, note_id(conn, "Linker"))
    append(WriteContext.for_person(conn), v, note, content="the person's line")
    after = vault_bytes(vault)
    assert after["Linker.md"].startswith(before["Linker.md"].rstrip(b"\n"))
    assert after["Linker.md"].rstrip(b"\n").endswith(b"the person's line")
    assert {p: b for p, b in after.items() if p != "Linker.md"} == {p: b for p, b in before.items() if p != "Linker.md"}
    assert journals(db_path) == []
    assert_index_is_fresh(conn, vault, tmp_path)
