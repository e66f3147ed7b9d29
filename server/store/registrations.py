"""The registered vaults, kept in a small file beside the database too (``<db>.vaults.json``).

A lost or damaged database would otherwise take the list of vaults with it, and with it the way back to
everything the vaults rebuild. The file is rewritten whenever a vault is added, removed or given another
dialect, sync tool or git mode (``save_registrations``, called by whoever changed the ``vaults`` table), and
read back into a database created anew (``connect`` calls ``restore_registrations`` when it creates the file)
and by ``kms repair``. A vault keeps its id, so history and provenance salvaged from the old file or a backup
still point at it. Derived columns (``last_indexed_at``, ``privacy_rules``) are not kept: the first index
fills them.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import apsw

KEPT = ("id", "name", "root", "added_at", "dialect", "sync", "git_mode")  # (sync: m053, git_mode: m054)


def registrations_path(db_path: str | Path) -> Path:
    db = Path(db_path)
    return db.with_name(db.name + ".vaults.json")


def _db_file(conn: apsw.Connection) -> Path | None:
    name = conn.filename
    return Path(name) if name else None  # "" for an in-memory database


def save_registrations(conn: apsw.Connection) -> None:
    """Write the ``vaults`` table to the file beside the database (atomically: a crash leaves the old one).
    A file that cannot be written is not an error for the change that asked: the database holds it."""
    db = _db_file(conn)
    if db is None:
        return
    have = {r[1] for r in conn.execute("PRAGMA table_info(vaults)")}
    kept = [c for c in KEPT if c in have]  # (a database at an older schema: the columns it has)
    cols = ", ".join(kept)
    vaults = [dict(zip(kept, r, strict=True)) for r in conn.execute(f"SELECT {cols} FROM vaults ORDER BY id")]
    target = registrations_path(db)
    text = json.dumps({"vaults": vaults}, indent=2) + "\n"
    partial = target.with_name(target.name + ".partial")
    with contextlib.suppress(OSError):
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, target)


def read_registrations(db_path: str | Path) -> list[dict[str, Any]]:
    """The vaults the file lists ([] when there is none or it does not parse)."""
    try:
        data = json.loads(registrations_path(db_path).read_text(encoding="utf-8"))
        vaults = data["vaults"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [
        v for v in vaults if isinstance(v, dict) and isinstance(v.get("name"), str) and isinstance(v.get("root"), str)
    ]


def restore_registrations(conn: apsw.Connection) -> int:
    """Register again, with their ids, the vaults the file lists and the database lacks; how many."""
    db = _db_file(conn)
    if db is None:
        return 0
    added = 0
    with conn:
        for v in read_registrations(db):
            conn.execute(
                "INSERT OR IGNORE INTO vaults(id, name, root, added_at, dialect, sync, git_mode) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    v.get("id"),
                    v["name"],
                    v["root"],
                    v.get("added_at") or 0.0,
                    v.get("dialect"),
                    v.get("sync"),
                    v.get("git_mode"),
                ),
            )
            added += conn.changes()
    return added
