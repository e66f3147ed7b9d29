"""A damaged or unreachable database: one clear line and a non-zero exit from every command (``kms mcp``
serves tools that say so instead), the
dashboard shows it, ``kms doctor`` detects it, and ``kms repair`` rebuilds it from the vaults while
carrying over what can still be read (note ids, hidden stamps, provenance, sessions, embeddings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest
from support.cli import kms, said
from support.sql import pairs

from server.activity.provenance import record
from server.activity.session_registry import touch_session
from server.index.indexer import index_vault
from server.index.notes import set_hidden
from server.store.db import check_database, connect
from server.store.health import database_error
from server.vault.registry import add_vault


def healthy(db: Path, vault_dir: Path, rows: int = 400) -> dict[str, str]:
    """A real database with state only it holds: a hidden note, sessions, provenance, embeddings."""
    conn = connect(db)
    vault = add_vault(conn, vault_dir, "sample")
    index_vault(conn, vault)
    ids = pairs(conn, "SELECT path, id FROM notes ORDER BY path")
    hidden_path = sorted(ids)[0]
    set_hidden(conn, ids[hidden_path], True)
    for i in range(rows):
        touch_session(conn, f"s{i}", kind="server", now=1000.0 + i)
        record(
            conn, tool="kms_append", session_id=f"s{i}", status="success", note_id=ids[hidden_path], message="x" * 2000
        )  # enough rows to span many pages
        conn.execute("INSERT INTO embeddings VALUES (?, ?, ?)", (f"h{i}", b"\0" * 1536, 1.0))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return {"hidden": hidden_path, **ids}


def not_sqlite(db: Path) -> None:
    db.write_text("# not a database\nsome notes\n" * 100)


def garbage_header(db: Path) -> None:
    data = db.read_bytes()
    db.write_bytes(b"\x00GARBAGE" * 8 + data[64:])


def truncated(db: Path) -> None:
    """The second half of the file gone, but never the notes' pages: the test checks that the notes read back
    keep their ids, and where the notes' leaves fall follows every table the migrations create before them
    (m044-m050 moved them past the half of this file)."""
    ro = apsw.Connection(f"file:{db}?immutable=1", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    try:
        page_size = ro.execute("PRAGMA page_size").fetchall()[0][0]
        last_note_page = ro.execute("SELECT max(pageno) FROM dbstat WHERE name = 'notes'").fetchall()[0][0]
    finally:
        ro.close()
    assert isinstance(page_size, int) and isinstance(last_note_page, int)
    data = db.read_bytes()
    db.write_bytes(data[: max(len(data) // 2, last_note_page * page_size)])


DAMAGE: dict[str, Callable[[Path], None]] = {
    "not-sqlite": not_sqlite,
    "garbage-header": garbage_header,
    "truncated": truncated,
}


def damaged(db: Path, vault_dir: Path, kind: str) -> dict[str, str]:
    ids = healthy(db, vault_dir)
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    DAMAGE[kind](db)
    return ids


def unreachable(tmp_path: Path, kind: str) -> Path:
    if kind == "folder":
        (tmp_path / "db-folder").mkdir()
        return tmp_path / "db-folder"
    (tmp_path / "a-file").write_text("x")
    return tmp_path / "a-file" / "kms.db"  # a path that cannot exist


@pytest.mark.parametrize("kind", [*DAMAGE, "folder", "cannot-exist"])
def test_every_command_says_what_is_wrong_in_one_line(
    db_path: Path, vault_dir: Path, tmp_path: Path, kind: str
) -> None:
    if kind in DAMAGE:
        damaged(db_path, vault_dir, kind)
        db, expect = db_path, "kms repair" if kind != "not-sqlite" else "is not a kms database"
    else:
        db, expect = unreachable(tmp_path, kind), "KMS_DB_PATH"
    env = {"KMS_DB_PATH": str(db)}
    for args in (["index"], ["search", "pasta"], ["status"], ["vault", "add", str(vault_dir)], ["tags"]):
        result = kms(*args, **env)
        assert result.exit_code == 4, (args, result.output)
        assert isinstance(result.exception, SystemExit), result.exception  # typer.Exit, not a crash
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error (database): ") and expect in lines[0], result.output
    served = subprocess.run(
        [sys.executable, "-m", "kmscli", "mcp"],
        input=b"",
        capture_output=True,
        timeout=60,
        env={**os.environ, "KMS_DB_PATH": str(db), "KMS_ENABLED": "1"},
    )
    assert served.returncode == 0 and served.stdout == b""  # it serves (tests/mcp/test_mcp_unavailable.py)
    err = served.stderr.decode().strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kms mcp: the database cannot be used (") and expect in err[0]
    doctor = kms("doctor", "--json", **env)
    report = json.loads(doctor.stdout)
    assert doctor.exit_code == 1 and not report["database"]["ok"] and expect in report["database"]["error"]


def test_doctor_finds_damage_that_opening_does_not(db_path: Path, vault_dir: Path) -> None:
    """A page damaged in the middle of the file: the database opens, SQLite's quick check fails."""
    healthy(db_path, vault_dir)
    assert check_database(db_path) is None
    data = bytearray(db_path.read_bytes())
    page = 16384
    for n in range(3, len(data) // page - 1, 2):
        data[n * page : n * page + 64] = b"\xff" * 64
    db_path.write_bytes(bytes(data))
    problem = check_database(db_path)
    assert problem is not None and problem.kind == "database" and "kms repair" in problem.message


def test_read_only_and_full_disk_errors_say_so(tmp_path: Path) -> None:
    """Both need privileges this test does not have (it may run as root): the classification of
    the real SQLite errors is checked instead."""
    ro = database_error(apsw.ReadOnlyError("attempt to write a readonly database"), tmp_path / "kms.db")
    assert ro.kind == "database" and "read-only" in ro.message and "KMS_DB_PATH" in ro.message
    full = database_error(apsw.FullError("database or disk is full"), tmp_path / "kms.db")
    assert full.kind == "disk-full" and "disk holding the database is full" in full.message
    enospc = database_error(OSError(28, "No space left on device"), tmp_path / "kms.db")
    assert enospc.kind == "disk-full"


@pytest.mark.parametrize("kind", ["garbage-header", "truncated"])
def test_repair_rebuilds_from_the_vaults_and_carries_over_what_can_be_read(
    db_path: Path, vault_dir: Path, kind: str
) -> None:
    ids = damaged(db_path, vault_dir, kind)
    result = kms("repair", "--json", "--yes")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    moved = Path(report["moved_to"])
    assert moved.exists() and moved.parent == db_path.parent  # kept, never deleted
    assert not list(db_path.parent.glob("*.header-rebuilt"))
    assert report["vaults"] == ["sample"]
    conn = connect(db_path)
    try:
        assert check_database(db_path) is None
        notes = pairs(conn, "SELECT path, id FROM notes")
        assert len(notes) == len(ids) - 1 and report["notes_indexed"] == len(notes)
        recovered = report["recovered"]
        if kind == "garbage-header":  # everything readable through the rebuilt header
            assert notes == {p: i for p, i in ids.items() if p != "hidden"}
            assert report["hidden_restored"] == 1 and recovered["tool_invocations"] == 400
            assert recovered["sessions"] == 400 and recovered["embeddings"] == 400
            assert not report["unreadable"]
        else:  # the second half is gone: what was read is back, what was lost is named
            assert sum(recovered.values()) > 0 and report["unreadable"]
            assert all(notes[p] == ids[p] for p in notes if p in ids)
        hidden = conn.execute("SELECT path FROM notes WHERE hidden_stamp IS NOT NULL").fetchall()  # kms hide's stamps
        assert [h[0] for h in hidden] == ([ids["hidden"]] if report["hidden_restored"] else [])
        assert conn.execute("SELECT count(*) FROM tool_invocations").fetchall()[0][0] == recovered["tool_invocations"]
    finally:
        conn.close()
    again = kms("repair")
    assert again.exit_code == 0 and "healthy, nothing to repair" in again.stdout


def test_repair_refuses_a_folder(tmp_path: Path) -> None:
    db = unreachable(tmp_path, "folder")
    result = kms("repair", KMS_DB_PATH=str(db))
    assert result.exit_code == 4 and "is a folder" in result.output and db.is_dir()


def test_repair_force_rebuilds_a_healthy_database_keeping_its_state(db_path: Path, vault_dir: Path) -> None:
    ids = healthy(db_path, vault_dir, rows=3)
    result = kms("repair", "--force", "--json", "--yes")
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["recovered"]["tool_invocations"] == 3
    conn = connect(db_path)
    assert pairs(conn, "SELECT path, id FROM notes") == {p: i for p, i in ids.items() if p != "hidden"}
    conn.close()


def test_repair_leaves_a_file_that_never_was_a_kms_database_untouched(db_path: Path, tmp_path: Path) -> None:
    note = "# Groceries\n\n- eggs\n- flour\n" * 50  # a note copied over KMS_DB_PATH
    db_path.write_text(note)
    for args in (["repair"], ["repair", "--yes"], ["repair", "--force", "--yes"]):
        result = kms(*args)
        assert result.exit_code == 4, result.output
        assert "is not a kms database" in said(result.output) and "kms repair" not in result.output
    assert db_path.read_text() == note and [p.name for p in tmp_path.iterdir() if "damaged" in p.name] == []


def test_repair_asks_before_moving_the_database_aside(db_path: Path, vault_dir: Path) -> None:
    damaged(db_path, vault_dir, "garbage-header")
    before = db_path.read_bytes()
    declined = kms("repair", input="n\n")
    assert declined.exit_code == 1 and "nothing changed" in said(declined.output)
    assert db_path.read_bytes() == before and not list(db_path.parent.glob("*.damaged-*"))
    accepted = kms("repair", input="y\n")
    assert accepted.exit_code == 0 and "Move" in said(accepted.output) and "rebuilt" in accepted.output
    assert len(list(db_path.parent.glob("kms.db.damaged-*"))) == 1 and check_database(db_path) is None
