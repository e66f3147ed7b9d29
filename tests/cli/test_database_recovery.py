"""History that survives the database (docs/recovery.md): ``kms repair`` takes back every row still on a
damaged file's pages and fills in from the newest backup what the damage took; the daily backup is made
between calls by the watcher's timer (and ``kms index``); the vaults are registered again when the
database is lost."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from support.cli import kms, ok

from server.activity import tokens
from server.activity.changes import FileChange, FilesChanged
from server.activity.provenance import record
from server.activity.session_registry import touch_session
from server.config.scopes import Scopes
from server.index.backups import backup_if_due, start_backup_if_due
from server.index.indexer import index_vault, remove_vault
from server.index.watcher import watch_vaults
from server.store.backup import backup_folder, list_backups, make_backup
from server.store.db import connect, rows, scalar, shared_commit
from server.store.locks import lock_file
from server.store.registrations import registrations_path
from server.vault.registry import add_vault

PAGE = 16384
# state only the database holds: what a repair must carry over (rows put back are counted per table)
KEPT = ("sessions", "tool_invocations", "tool_file_changes", "history_versions", "history_blobs")


def _work(conn: apsw.Connection, first: int, count: int) -> None:
    """Sessions, each with an edit that records its file change (what a revert replays) and its revert:
    enough to fill pages past the 85 or so (16 KiB) root pages an empty kms database starts with."""
    with shared_commit(conn):
        for i in range(first, first + count):
            touch_session(conn, f"s{i}", kind="server", now=1000.0 + i)
            change = FilesChanged("a.md", (FileChange("a.md", None, 0, "old " * 20, "new " * 400, "h0", f"h{i}"),))
            done = record(
                conn, tool="kms_edit", session_id=f"s{i}", status="success", message="x" * 6000, change=change
            )
            record(conn, tool="kms_revert", session_id=f"s{i}", status="success", reverts_id=done)


def _history(conn: apsw.Connection, vault_dir: Path) -> None:
    """Three more versions of five notes."""
    vault = add_vault(conn, vault_dir, "sample")
    index_vault(conn, vault)
    notes = sorted(vault_dir.rglob("*.md"))[:5]
    for round_ in range(3):
        for note in notes:
            note.write_text(note.read_text() + f"\nedited, round {round_}\n" + "more words " * 300)
        index_vault(conn, vault)


def _close(conn: apsw.Connection, db: Path) -> None:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)


def _counts(db: Path) -> dict[str, int]:
    conn = apsw.Connection(str(db))
    try:
        return {t: int(scalar(conn, f"SELECT count(*) FROM {t}")) for t in KEPT}
    finally:
        conn.close()


def _most_lost(db: Path, pages: set[int]) -> dict[str, int]:
    """At most how many rows of each table damage to ``pages`` can take (SQLite's dbstat, on the file before
    the damage): the entries on its damaged b-tree pages (leaves; interior pages too in a WITHOUT ROWID
    table, whose interior entries are rows), and one row per damaged overflow page."""
    conn = apsw.Connection(str(db))
    try:
        lost = {}
        for table in KEPT:
            without_rowid = "WITHOUT ROWID" in str(
                scalar(conn, "SELECT sql FROM sqlite_schema WHERE name = ?", (table,))
            )
            stat = rows(conn, "SELECT pageno, pagetype, ncell FROM dbstat WHERE name = ?", (table,))
            lost[table] = sum(
                (s["ncell"] if s["pagetype"] == "leaf" or (s["pagetype"] == "internal" and without_rowid) else 0)
                + (s["pagetype"] == "overflow")
                for s in stat
                if s["pageno"] in pages
            )
        return lost
    finally:
        conn.close()


def _pages_of(db: Path, table: str) -> list[int]:
    conn = apsw.Connection(str(db))
    try:
        return sorted(
            r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (table,))
        )
    finally:
        conn.close()


def _repair() -> dict:
    result = ok(kms("repair", "--json", "--yes"))
    return json.loads(result.stdout)


@pytest.fixture
def lived_in(db_path: Path, vault_dir: Path) -> Iterator[Path]:
    """A database with a vault, notes with several versions each, 300 sessions with their edits and reverts."""
    conn = connect(db_path)
    _work(conn, 0, 600)
    _history(conn, vault_dir)
    _work(conn, 600, 150)
    _close(conn, db_path)
    yield db_path


def _assert_back_as_far_as_readable(db: Path, report: dict, whole: dict[str, int], lost: dict[str, int]) -> dict:
    """Every row the damage did not reach is back (at most the rows on damaged pages are missing)."""
    assert report["vaults"] == ["sample"] and not report.get("from_backup")
    recovered = report["recovered"]
    floors = {}
    for table in KEPT:
        floors[table] = whole[table] - lost[table] - (lost["tool_invocations"] if table == "tool_file_changes" else 0)
        assert whole[table] >= recovered[table] >= floors[table], (table, whole[table], recovered[table], floors)
    assert floors["tool_invocations"] > 0 and recovered["tool_file_changes"] > 0  # (revert records)
    assert _counts(db)["sessions"] == recovered["sessions"]
    if floors["history_versions"]:  # a note whose versions came back: kms history lists them
        edited = _edited(db)
        assert edited
        listed = ok(kms("history", "show", "--json", edited[0]))
        assert len(json.loads(listed.stdout)["versions"]) >= 3
    return floors


def _edited(db: Path) -> list[str]:
    conn = apsw.Connection(str(db))
    try:
        return [
            str(r[0])
            for r in conn.execute(
                "SELECT path FROM history_versions GROUP BY hid HAVING count(*) >= 3 ORDER BY path"
            ).fetchall()
        ]
    finally:
        conn.close()


def test_a_database_cut_to_a_third_gives_back_every_row_on_its_remaining_pages(lived_in: Path) -> None:
    db = lived_in
    whole = _counts(db)
    data = db.read_bytes()
    kept = len(data) // 3 // PAGE
    lost = _most_lost(db, set(range(kept + 1, len(data) // PAGE + 1)))
    db.write_bytes(data[: kept * PAGE])
    report = _repair()
    _assert_back_as_far_as_readable(db, report, whole, lost)
    assert report["unreadable"]  # what the cut took is named


def test_pages_damaged_in_the_middle_lose_only_their_own_rows(lived_in: Path) -> None:
    db = lived_in
    whole = _counts(db)
    calls, sessions = _pages_of(db, "tool_invocations"), _pages_of(db, "sessions")
    # two damaged stretches in one table: reading forwards and backwards, SQLite stops at each
    smashed = {calls[len(calls) // 3], calls[2 * len(calls) // 3], sessions[len(sessions) // 2]}
    lost = _most_lost(db, smashed)
    with open(db, "r+b") as f:
        for page in smashed:
            f.seek((page - 1) * PAGE)
            f.write(b"\xa5" * PAGE)
    report = _repair()
    floors = _assert_back_as_far_as_readable(db, report, whole, lost)
    assert floors["history_versions"] == whole["history_versions"] and floors["sessions"] > 0
    assert whole["tool_invocations"] - report["recovered"]["tool_invocations"] <= lost["tool_invocations"]


def test_what_the_damage_took_comes_back_from_the_daily_backup(db_path: Path, vault_dir: Path, tmp_path: Path) -> None:
    conn = connect(db_path)
    _history(conn, vault_dir)
    (tmp_path / "gone").mkdir()
    add_vault(conn, tmp_path / "gone", "gone")
    _work(conn, 0, 300)
    token, _secret = tokens.create(conn, label="cursor", scopes=Scopes.parse("tier:read"))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    copy = backup_if_due(db_path)  # what the timer runs (as ``kms index`` does)
    assert copy is not None and list_backups(db_path) == [copy]
    at_backup = _counts(copy)
    ids = {r[0] for r in conn.execute("SELECT id FROM sessions")}
    _work(conn, 300, 60)  # after the backup: only the damaged file has these
    tokens.revoke(conn, token.id)
    remove_vault(conn, "gone")
    _close(conn, db_path)
    token_pages = set(_pages_of(db_path, "tokens")) | set(_pages_of(db_path, "vaults"))
    data = db_path.read_bytes()
    db_path.write_bytes(data[: len(data) // 3 // PAGE * PAGE])
    with open(db_path, "r+b") as f:  # the revoked token's row is lost with its page, the vaults with theirs
        for page in token_pages:
            f.seek((page - 1) * PAGE)
            f.write(b"\xa5" * PAGE)
    report = _repair()
    assert report["backup"] == str(copy) and report["from_backup"]["sessions"] > 0
    assert report["vaults"] == ["sample"]  # (from <db>.vaults.json: the vault removed since stays removed)
    after = _counts(db_path)
    for table in KEPT:
        if table != "history_versions":  # (the index adds the files' current versions)
            assert after[table] >= at_backup[table], table
    repaired = apsw.Connection(str(db_path))
    try:
        assert ids <= {r[0] for r in repaired.execute("SELECT id FROM sessions")}
        assert int(scalar(repaired, "SELECT count(*) FROM history_versions")) >= at_backup["history_versions"]
        # a token revoked since the backup does not come back alive from it
        assert not repaired.execute("SELECT 1 FROM tokens WHERE id = ? AND revoked_at IS NULL", (token.id,)).fetchall()
    finally:
        repaired.close()


def test_the_watcher_makes_the_daily_backup_on_its_own_thread_and_keeps_a_few(db_path: Path, vault_dir: Path) -> None:
    ok(kms("config", "set", "backup.keep", "2"))
    conn = connect(db_path)
    _history(conn, vault_dir)
    conn.close()
    stop = threading.Event()
    quiet = {"stop": stop, "backup_quiet_s": 0.5}  # (30 s in the service: the copy waits for still files)
    watcher = threading.Thread(target=watch_vaults, args=(db_path,), kwargs=quiet, daemon=True)
    watcher.start()
    try:
        deadline = time.monotonic() + 60
        while not list_backups(db_path) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        watcher.join(30)
    (copy,) = list_backups(db_path)
    check = apsw.Connection(str(copy), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert check.execute("PRAGMA quick_check").fetchall() == [("ok",)]
        assert check.execute("SELECT name FROM vaults").fetchall() == [("sample",)]
    finally:
        check.close()
    assert start_backup_if_due(db_path) is None  # a day has not passed
    for _ in range(3):  # due every time: only backup.keep copies stay
        thread = start_backup_if_due(db_path, every_s=0)
        assert thread is not None
        thread.join(30)
    assert len(list_backups(db_path)) == 2 and copy not in list_backups(db_path)
    ok(kms("config", "set", "backup.enabled", "false"))
    assert start_backup_if_due(db_path, every_s=0) is None and backup_if_due(db_path, every_s=0) is None


def test_kms_index_makes_the_backup_when_it_is_due(db_path: Path, vault_dir: Path) -> None:
    ok(kms("vault", "add", str(vault_dir), "--name", "sample"))
    before = list_backups(db_path)
    ok(kms("index"))
    assert len(list_backups(db_path)) == len(before) + (0 if before else 1) >= 1
    assert _counts(list_backups(db_path)[0]) == _counts(db_path)  # copied in one step (foreground), whole


def test_a_lost_database_is_created_anew_with_its_vaults(db_path: Path, vault_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(vault_dir, other)
    ok(kms("vault", "add", str(vault_dir), "--name", "sample"))
    ok(kms("vault", "add", str(other), "--name", "second"))
    ok(kms("vault", "set", "second", "dialect=dendron"))
    ok(kms("vault", "remove", "sample"))
    ok(kms("vault", "add", str(vault_dir), "--name", "again"))
    kept = json.loads(registrations_path(db_path).read_text())["vaults"]
    assert {v["name"]: v["dialect"] for v in kept} == {"second": "dendron", "again": "obsidian"}
    for suffix in ("", "-wal", "-shm"):
        Path(str(db_path) + suffix).unlink(missing_ok=True)
    listed = json.loads(ok(kms("vault", "list", "--json")).stdout)
    assert {v["name"]: (v["root"], v["dialect"]) for v in listed} == {
        "second": (str(other.resolve()), "dendron"),
        "again": (str(vault_dir.resolve()), "obsidian"),
    }
    ok(kms("index"))
    found = json.loads(ok(kms("search", "kms", "--json")).stdout)
    assert found


def test_with_the_list_of_tables_gone_rows_are_matched_to_kms_tables_by_shape(lived_in: Path) -> None:
    db = lived_in
    whole = _counts(db)
    with open(db, "r+b") as f:  # a torn first write: the header and page 1's b-tree header, the list of tables' root
        f.write(b"\xa5" * 4096)
    report = _repair()
    assert report["header_rebuilt"] and report["recovered"]["tool_invocations"] == whole["tool_invocations"]
    assert report["recovered"]["sessions"] == whole["sessions"]


def test_a_copy_under_way_in_another_process_is_not_made_twice(db_path: Path, vault_dir: Path) -> None:
    conn = connect(db_path)
    _history(conn, vault_dir)
    conn.close()
    folder = backup_folder(db_path)
    folder.mkdir()
    (folder / "kms-20000101-000000-000000.db.partial").write_bytes(b"half a copy")  # a killed copier's
    with lock_file(folder / ".lock"):  # another process copying now
        assert make_backup(db_path) is None
    copy = make_backup(db_path)
    assert copy is not None and list_backups(db_path) == [copy] and not list(folder.glob("*.partial"))
    assert make_backup(db_path, every_s=3600) is None  # (due once a day: asked again, not due)
