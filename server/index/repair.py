"""``kms repair``: the files are the truth, so a damaged database is rebuilt from the vaults.

The damaged file (and its ``-wal``/``-shm``) is moved aside, never deleted. What only the
database holds is read back from it row by row, as far as it can still be read (forwards until
a damaged page, then backwards from the end): the vaults, each note's public id and hidden stamp,
provenance, sessions, read tracking, rate-limit state and embeddings. A new database is built,
the vaults are indexed from their files, and the salvaged rows are put back. The report says,
table by table, what was recovered and what was lost.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from server.errors import KmsError
from server.store.db import check_database, connect
from server.store.health import not_kms_database, was_kms_database

# state only the database holds, put back as it was (the index itself is rebuilt from the files)
CARRIED = ("sessions", "tool_invocations", "note_reads", "write_counters", "write_events", "embeddings")
# a note's history (m025): put back before the vaults are indexed, so each note's line is found again by its
# path (its row, and so its rid, is new) and the index adds a version only where the file differs
HISTORY = ("history_blobs", "history_dicts", "history_notes", "history_ids", "history_versions")
SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass
class RepairReport:
    db_path: str
    moved_to: str | None = None
    damage: str | None = None
    header_rebuilt: bool = False
    recovered: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)  # table -> why (rows past a damaged page are lost)
    vaults: list[str] = field(default_factory=list)
    notes_indexed: int = 0
    hidden_restored: int = 0
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _rows(conn: apsw.Connection, table: str) -> tuple[list[dict[str, Any]], str | None]:
    """Every row still readable: forwards by rowid until damage, then backwards from the end."""
    cols: list[str] = []
    try:
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    except apsw.Error as e:
        return [], f"table unreadable ({e})"
    if not cols:
        return [], "table missing"
    has_rowid = True
    try:
        conn.execute(f"SELECT rowid FROM {table} LIMIT 0").fetchall()
    except apsw.SQLError:
        has_rowid = False
    select = ", ".join(f'"{c}"' for c in cols)
    key_sql = "rowid, " if has_rowid else ""
    out: dict[Any, dict[str, Any]] = {}
    try:
        for row in conn.execute(f"SELECT {key_sql}{select} FROM {table}" + (" ORDER BY rowid" if has_rowid else "")):
            key, values = (row[0], row[1:]) if has_rowid else (row, row)
            out[key] = dict(zip(cols, values, strict=True))
        return list(out.values()), None
    except apsw.Error as e:
        problem = f"rows past a damaged page were lost ({e})"
    if has_rowid:  # the rows after the damage, read from the end
        try:
            for row in conn.execute(f"SELECT rowid, {select} FROM {table} ORDER BY rowid DESC"):
                if row[0] in out:
                    break
                out[row[0]] = dict(zip(cols, row[1:], strict=True))
        except apsw.Error:
            pass
    return list(out.values()), problem


def _move_aside(db: Path, stamp: str) -> Path:
    dest = db.with_name(f"{db.name}.damaged-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(str(db) + suffix)
        if src.exists() or src.is_symlink():
            os.replace(src, Path(str(dest) + suffix))
    return dest


def _open_damaged(path: Path, report: RepairReport) -> apsw.Connection | None:
    """A read-only connection to the moved-aside file; a garbage header is rebuilt on a copy."""
    try:
        head = path.read_bytes()[:100] if path.is_file() else b""
    except OSError as e:
        report.errors.append(f"cannot read the damaged file: {e}")
        return None
    target = path
    if len(head) == 100 and not head.startswith(SQLITE_MAGIC):
        target = path.with_name(path.name + ".header-rebuilt")
        shutil.copyfile(path, target)
        with open(target, "r+b") as f:
            f.write(_fresh_header())
        report.header_rebuilt = True
    try:
        conn = apsw.Connection(str(target), flags=apsw.SQLITE_OPEN_READONLY)
        conn.execute("PRAGMA writable_schema=ON")  # a truncated file: read the pages that are left
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return conn
    except apsw.Error as e:  # whatever the damage: nothing can be read back
        report.errors.append(f"nothing could be read from the damaged file ({e})")
        return None


def _fresh_header() -> bytes:
    """A valid 100-byte SQLite header for a kms database: 16 KiB pages, UTF-8, schema format 4; the
    change counter differs from version-valid-for, so SQLite takes the page count from the file."""

    def u32(n: int) -> bytes:
        return n.to_bytes(4, "big")

    header = SQLITE_MAGIC + bytes((0x40, 0x00, 1, 1, 0, 64, 32, 32))  # page size, journal, payload fractions
    header += u32(1) + u32(0) + u32(0) + u32(0) + u32(1) + u32(4)  # counter, size, freelist x2, cookie, format
    header += u32(0) + u32(0) + u32(1) + u32(0) + u32(0) + u32(0)  # cache, vacuum root, UTF-8, user, vacuum, app
    header += bytes(20) + u32(0) + u32(3045000)  # reserved, version-valid-for, SQLite version
    assert len(header) == 100
    return header


def needs_repair(db_path: str | Path, *, force: bool = False) -> str | None:
    """What is wrong with the database (or "rebuilt on request" with ``force``); None when it is healthy.
    Refuses a folder and a file that never was a kms database: repair moves only kms's own files."""
    db = Path(db_path)
    if db.is_dir():
        raise KmsError(
            "database",
            f"{db} is a folder, not a database file: point KMS_DB_PATH at a file; kms repair never moves folders",
            path=str(db),
        )
    if db.is_file() and db.stat().st_size and not was_kms_database(db):  # (an empty file becomes one)
        raise not_kms_database(db)
    damage = check_database(db) if db.exists() else None
    if damage is None:
        return "rebuilt on request (--force)" if force else None
    return damage.message


def repair_database(db_path: str | Path, *, force: bool = False) -> RepairReport:
    """Move a damaged database aside and rebuild it; ``force`` rebuilds a healthy one too."""
    from server.index.indexer import index_vault
    from server.vault.dialects import DIALECTS
    from server.vault.registry import add_vault

    db = Path(db_path)
    report = RepairReport(db_path=str(db))
    damage = needs_repair(db, force=force)
    if damage is None:
        return report
    report.damage = damage
    moved = _move_aside(db, time.strftime("%Y%m%d-%H%M%S"))
    report.moved_to = str(moved)
    old = _open_damaged(moved, report)
    salvaged: dict[str, list[dict[str, Any]]] = {}
    if old is not None:
        for table in ("vaults", "notes", *CARRIED, *HISTORY):
            rows, problem = _rows(old, table) if table != "notes" else _note_rows(old)
            salvaged[table] = rows
            if problem:
                report.unreadable[table] = problem
        old.close()
    conn = connect(db)
    try:
        vault_names = {v["id"]: v["name"] for v in salvaged.get("vaults", [])}
        added = []
        for v in salvaged.get("vaults", []):
            try:
                chosen = v.get("dialect")  # the dialect the person chose or kms detected, kept
                added.append((v["id"], add_vault(conn, v["root"], v["name"], chosen if chosen in DIALECTS else None)))
            except KmsError as e:
                report.errors.append(f"vault {v['name']} ({v['root']}): {e.message}")
        _put_back_history(conn, salvaged, {old: vault.id for old, vault in added}, report)
        for _old, vault in added:
            report.vaults.append(vault.name)
            index = index_vault(conn, vault, full=True)
            report.notes_indexed += index.added
            report.errors.extend(index.errors)
        report.recovered["vaults"] = len(report.vaults)
        report.recovered["notes"], report.hidden_restored = _restore_notes(conn, salvaged.get("notes", []), vault_names)
        for table in CARRIED:
            report.recovered[table] = _put_back(conn, table, salvaged.get(table, []))
    finally:
        conn.close()
    if report.header_rebuilt:
        Path(str(moved) + ".header-rebuilt").unlink(missing_ok=True)
    return report


def _put_back_history(
    conn: apsw.Connection, salvaged: dict[str, list[dict[str, Any]]], vault_ids: dict[Any, int], report: RepairReport
) -> None:
    """The salvaged history, its vaults renumbered as re-added and every line detached from its (old) row:
    the index joins each note to its line again by path."""
    for table in HISTORY:
        rows = salvaged.get(table, [])
        if table in ("history_notes", "history_dicts"):
            rows = [{**r, "vault_id": vault_ids[r["vault_id"]]} for r in rows if r.get("vault_id") in vault_ids]
        if table == "history_notes":
            rows = [{**r, "rid": None} for r in rows]
        report.recovered[table] = _put_back(conn, table, rows)


def _note_rows(old: apsw.Connection) -> tuple[list[dict[str, Any]], str | None]:
    """Only what the files cannot tell: each note's public id and hidden stamp, by vault and path."""
    rows, problem = _rows(old, "notes")
    # the person's stamp: ``hidden_stamp`` since m008; before it, ``hidden_at`` was the stamp itself
    return [
        {
            "vault_id": r.get("vault_id"),
            "path": r.get("path"),
            "id": r.get("id"),
            "stamp": r.get("hidden_stamp") if "hidden_stamp" in r else r.get("hidden_at"),
        }
        for r in rows
    ], problem


def _restore_notes(conn: apsw.Connection, rows: list[dict[str, Any]], vault_names: dict[int, str]) -> tuple[int, int]:
    """Give each re-indexed note back its old public id (provenance and agents refer to it) and
    its hidden stamp. Returns (notes matched, hidden stamps restored)."""
    matched = hidden = 0
    with conn:
        for r in rows:
            name = vault_names.get(r["vault_id"])
            if name is None:
                continue
            found = conn.execute(
                "SELECT n.rid FROM notes n JOIN vaults v ON v.id = n.vault_id WHERE v.name = ? AND n.path = ?",
                (name, r["path"]),
            ).fetchall()
            if not found:
                continue  # the file is gone: nothing to restore
            taken = conn.execute("SELECT 1 FROM notes WHERE id = ? AND rid != ?", (r["id"], found[0][0])).fetchall()
            if not taken:
                conn.execute("UPDATE notes SET id = ? WHERE rid = ?", (r["id"], found[0][0]))
            if r["stamp"] is not None:  # a rule-hidden note stays hidden by its rule anyway
                conn.execute(
                    "UPDATE notes SET hidden_stamp = ?1, hidden_at = ?1 WHERE rid = ?2", (r["stamp"], found[0][0])
                )
                hidden += 1
            matched += 1
    return matched, hidden


def _put_back(conn: apsw.Connection, table: str, rows: list[dict[str, Any]]) -> int:
    """Insert salvaged rows with the columns the new schema has; duplicates are skipped."""
    if not rows:
        return 0
    cols = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
    done = 0
    with conn:
        for row in rows:
            values = {k: v for k, v in row.items() if k in cols}
            names = ", ".join(f'"{k}"' for k in values)
            marks = ", ".join("?" for _ in values)
            try:
                conn.execute(f"INSERT OR IGNORE INTO {table} ({names}) VALUES ({marks})", tuple(values.values()))
                done += conn.changes()
            except apsw.ConstraintError:
                continue  # a row the damage left inconsistent (a NULL in a NOT NULL column)
    return done
