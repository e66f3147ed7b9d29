"""``kms repair``: the files are the truth, so a damaged database is rebuilt from the vaults.

The damaged file (and its ``-wal``/``-shm``) is moved aside, never deleted. What only the
database holds is read back from its pages, every row SQLite's file format still holds
(``server.store.salvage``: past a damaged page too), and what the damage took is filled in from the
newest whole backup (``server.store.backup``; a row the damaged file still has wins over the backup's).
The vaults are registered again (from the file, the backup and ``<db>.vaults.json``), a new database is
built, indexed from the files, and the salvaged rows are put back: each note's public id and hidden
stamp, its history, provenance and revert records, sessions, read tracking, rate-limit state, tokens
and embeddings. The report says, table by table, what was recovered, what came from the backup and
what was lost (docs/recovery.md).
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from server.errors import KmsError
from server.index.indexer import index_vault
from server.store.backup import newest_good_backup
from server.store.db import check_database, connect
from server.store.health import not_kms_database, was_kms_database
from server.store.registrations import registrations_path
from server.store.salvage import Key, salvage
from server.vault.dialects import DIALECTS
from server.vault.registry import add_vault, list_vaults

# state only the database holds, put back as it was (the index itself is rebuilt from the files), parents first
CARRIED = (
    "sessions",
    "tool_invocations",
    "tool_file_changes",
    "note_reads",
    "session_records",
    "session_searches",
    "session_captures",
    "session_files",
    "write_counters",
    "write_events",
    "tokens",
    "stamps_gone",
    "embeddings",
)
# a note's history (m025): put back before the vaults are indexed, so each note's line is found again by its
# path (its row, and so its rid, is new) and the index adds a version only where the file differs
HISTORY = ("history_blobs", "history_dicts", "history_notes", "history_ids", "history_versions")
SALVAGED = ("vaults", "notes", *CARRIED, *HISTORY)
# never taken from a backup: a token revoked since the backup, its row on a damaged page, would come back alive;
# nor the vaults when <db>.vaults.json lists them as they are now (one removed since would come back)
NOT_FROM_BACKUP = ("tokens",)


@dataclass
class RepairReport:
    db_path: str
    moved_to: str | None = None
    damage: str | None = None
    header_rebuilt: bool = False  # the file's header was garbage: its pages were read with a guessed page size
    recovered: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)  # table -> why (rows on damaged pages are lost)
    backup: str | None = None  # the backup the lost rows were taken from
    from_backup: dict[str, int] = field(default_factory=dict)  # table -> rows only the backup still had
    vaults: list[str] = field(default_factory=list)
    notes_indexed: int = 0
    hidden_restored: int = 0
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _move_aside(db: Path, stamp: str) -> Path:
    dest = db.with_name(f"{db.name}.damaged-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(str(db) + suffix)
        if src.exists() or src.is_symlink():
            os.replace(src, Path(str(dest) + suffix))
    return dest


def _salvage(moved: Path, db: Path, report: RepairReport) -> dict[str, dict[Key, dict[str, Any]]]:
    """The rows of the damaged file, and those only the newest whole backup still has."""
    backup = newest_good_backup(db)
    try:
        with tempfile.TemporaryDirectory() as tmp:  # (the tables' shapes, should page 1 be unreadable)
            schema = backup or _empty_kms_database(Path(tmp) / "schema.db")
            found = salvage(moved, set(SALVAGED), fallback_schema=schema)
    except OSError as e:
        report.errors.append(f"nothing could be read from the damaged file ({e})")
        found = None
    tables: dict[str, dict[Key, dict[str, Any]]] = {t: {} for t in SALVAGED}
    if found is not None:
        report.header_rebuilt = found.header_guessed
        for table in SALVAGED:
            tables[table] = dict(found.tables.get(table, {}))
            if found.damaged.get(table):
                report.unreadable[table] = f"{found.damaged[table]} damaged page(s): the rows on them were lost"
            elif table not in found.tables:
                report.unreadable[table] = "not found in the damaged file"
        if not found.schema_read:
            report.errors.append("the damaged file's list of tables was unreadable: rows were matched by shape")
    if backup is not None:
        report.backup = str(backup)
        older = salvage(backup, set(SALVAGED))
        skip = NOT_FROM_BACKUP + (("vaults",) if registrations_path(db).exists() else ())
        for table in (t for t in SALVAGED if t not in skip):
            only = {k: r for k, r in older.tables.get(table, {}).items() if k not in tables[table]}
            tables[table].update(only)
            if only:
                report.from_backup[table] = len(only)
    return tables


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


def _empty_kms_database(path: Path) -> Path:
    connect(path).close()
    return path


def repair_database(db_path: str | Path, *, force: bool = False) -> RepairReport:
    """Move a damaged database aside and rebuild it; ``force`` rebuilds a healthy one too."""

    db = Path(db_path)
    report = RepairReport(db_path=str(db))
    damage = needs_repair(db, force=force)
    if damage is None:
        return report
    report.damage = damage
    moved = _move_aside(db, time.strftime("%Y%m%d-%H%M%S"))
    report.moved_to = str(moved)
    salvaged = {t: list(rows.values()) for t, rows in _salvage(moved, db, report).items()}
    conn = connect(db)  # a new database: the vaults of <db>.vaults.json are registered again, with their ids
    try:
        known = {v.name: v for v in list_vaults(conn)}
        vault_ids: dict[Any, int] = {v.id: v.id for v in known.values()}  # (<db>.vaults.json keeps the ids)
        for v in salvaged["vaults"]:
            if v.get("name") in known:
                vault_ids[v["id"]] = known[v["name"]].id
                continue
            try:
                chosen = v.get("dialect")  # the dialect the person chose or kms detected, kept
                vault = add_vault(conn, v["root"], v["name"], chosen if chosen in DIALECTS else None)
            except KmsError as e:
                report.errors.append(f"vault {v['name']} ({v['root']}): {e.message}")
                continue
            vault_ids[v["id"]] = vault.id
        _put_back_history(conn, salvaged, vault_ids, report)
        for vault in list_vaults(conn):
            if not vault.root.is_dir():
                report.errors.append(f"vault {vault.name}: its folder {vault.root} is gone")
                continue
            report.vaults.append(vault.name)
            index = index_vault(conn, vault, full=True)
            report.notes_indexed += index.added
            report.errors.extend(index.errors)
        names = {v.id: v.name for v in list_vaults(conn)}
        vault_names = {old: names[new] for old, new in vault_ids.items() if new in names}
        report.recovered["vaults"] = len(report.vaults)
        report.recovered["notes"], report.hidden_restored = _restore_notes(
            conn, _note_rows(salvaged["notes"]), vault_names
        )
        for table in CARRIED:
            report.recovered[table] = _put_back(conn, table, salvaged[table])
    finally:
        conn.close()
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


def _note_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only what the files cannot tell: each note's public id and hidden stamp, by vault and path."""
    # the person's stamp: ``hidden_stamp`` since m008; before it, ``hidden_at`` was the stamp itself
    return [
        {
            "vault_id": r.get("vault_id"),
            "path": r.get("path"),
            "id": r.get("id"),
            "stamp": r.get("hidden_stamp") if "hidden_stamp" in r else r.get("hidden_at"),
        }
        for r in rows
    ]


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
