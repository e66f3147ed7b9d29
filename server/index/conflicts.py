"""Conflicts between two versions of one note, kept in the ``conflicts`` table (m052).

Two kinds open one:

- **a sync tool's conflict copy** (``server.vault.conflict_names``): the indexer never makes it a note (not in
  search, links, tags, agents' reads or resources); it opens a conflict naming the note and the copy
  (``copy_path``) instead (``settle_copies`` for a scan, ``copy_changed`` for one file the watcher saw). The
  files are the truth: both sides are read from them when shown (``sides``), so ``mine``/``theirs`` stay
  NULL. A copy removed by hand closes its conflict (resolution ``copy-gone``).
- **a git merge that did not go clean** (git mode): no copy file; both sides (and their base) are in
  ``mine``/``theirs``/``base`` (``open_conflict``).

While a note has an open conflict, an agent's write to it answers ``conflict``
(``server.writes.context.WriteContext.check_write`` asks ``open_for``): an agent must not build on one side
while the person has not chosen. The person resolves it: ``server.writes.conflict_resolve``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Container, Iterator
from pathlib import Path
from typing import Any

import apsw

from server.config.settings import default_config_path, load_settings
from server.errors import KmsError
from server.store.db import rows, scalar, write_tx
from server.vault.conflict_names import CopyNames, CopyOf
from server.vault.registry import Vault
from server.vault.scope import VaultScope

COPY_GONE = "copy-gone"  # the resolution of a conflict whose copy someone removed by hand
NOT_A_COPY = "not-a-copy"  # ... whose file is a note by the vault's sync tools now (``kms vault set NAME sync=``)
_COLS = "id, vault_id, path, copy_path, source, opened_at, resolved_at, resolution"

_patterns_cache: dict[str, tuple[tuple[int, int] | None, tuple[str, ...]]] = {}


def _patterns() -> tuple[str, ...]:
    """``sync.conflict_patterns``, read again only when the settings file changed (one stat a call)."""

    cfg = default_config_path()
    try:
        st = os.stat(cfg)
        stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    known = _patterns_cache.get(str(cfg))
    if known and known[0] == stamp:
        return known[1]

    patterns = tuple(load_settings(cfg, env={}, has_vault=True).get("sync.conflict_patterns") or ())
    _patterns_cache[str(cfg)] = (stamp, patterns)
    return patterns


def names_for(vault: Vault) -> CopyNames:
    """How this vault's file names are read: its sync tools and the person's patterns."""
    return CopyNames.of(vault.sync, _patterns())


def split_copies(names: CopyNames, files: dict[str, Any], attachments: list[str] | None = None) -> dict[str, CopyOf]:
    """Take the conflict copies out of a scan (``files``: notes by path; ``attachments``: the other files,
    where git's ``Note.md.orig`` is), in place; return them by path. One name match a file."""
    copies: dict[str, CopyOf] = {}
    exists = files.__contains__
    may_be_copy = names.may_be_copy
    for path in files:
        found = names.copy_of(path, exists) if may_be_copy(path) else None
        if found is not None:
            copies[path] = found
    for path in copies:
        del files[path]
    if attachments:
        kept = []
        for path in attachments:
            found = names.copy_of(path, exists) if path.endswith(".orig") else None
            if found is None:
                kept.append(path)
            else:
                copies[path] = found
        attachments[:] = kept
    return copies


def open_conflict(
    conn: apsw.Connection,
    *,
    vault_id: int,
    path: str,
    source: str,
    copy_path: str | None = None,
    mine: bytes | None = None,
    theirs: bytes | None = None,
    base: bytes | None = None,
) -> int:
    """Record a conflict over the note at ``path``; its id. A copy already open is not recorded twice."""
    with _tx(conn):
        if copy_path is not None:
            known = conn.execute(
                "SELECT id FROM conflicts WHERE vault_id = ? AND copy_path = ? AND resolved_at IS NULL",
                (vault_id, copy_path),
            ).fetchone()
            if known is not None:
                return int(known[0])
        conn.execute(
            "INSERT INTO conflicts(vault_id, path, copy_path, source, mine, theirs, base, opened_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (vault_id, path, copy_path, source, mine, theirs, base, time.time()),
        )
        return int(conn.last_insert_rowid())


def open_conflicts(conn: apsw.Connection, vault_id: int | None = None) -> list[dict]:
    """The open conflicts (of one vault, or all), oldest first, with their vault's name (no blobs)."""
    where = "c.resolved_at IS NULL" + (" AND c.vault_id = ?" if vault_id is not None else "")
    return rows(
        conn,
        f"SELECT c.id, c.vault_id, v.name AS vault, c.path, c.copy_path, c.source, c.opened_at FROM conflicts c "
        f"JOIN vaults v ON v.id = c.vault_id WHERE {where} ORDER BY c.opened_at, c.id",
        (vault_id,) if vault_id is not None else (),
    )


def open_count(conn: apsw.Connection, vault_id: int | None = None) -> int:
    """How many conflicts are open (in one vault, or all)."""
    where = "resolved_at IS NULL" + (" AND vault_id = ?" if vault_id is not None else "")
    return int(scalar(conn, f"SELECT count(*) FROM conflicts WHERE {where}", (vault_id,) if vault_id else ()) or 0)


def open_for(conn: apsw.Connection, vault_id: int, path: str) -> dict | None:
    """The open conflict over the note at ``path``, if there is one (the oldest)."""
    found = rows(
        conn,
        f"SELECT {_COLS} FROM conflicts WHERE vault_id = ? AND path = ? AND resolved_at IS NULL ORDER BY id LIMIT 1",
        (vault_id, path),
    )
    return found[0] if found else None


def get(conn: apsw.Connection, conflict_id: int) -> dict:
    """One conflict with its sides' blobs; ``not-found`` for an id that names none."""
    found = rows(conn, f"SELECT {_COLS}, mine, theirs, base FROM conflicts WHERE id = ?", (conflict_id,))
    if not found:
        raise KmsError("not-found", f"no conflict {conflict_id}; `kms conflicts` lists the open ones")
    return found[0]


def resolve(conn: apsw.Connection, conflict_id: int, resolution: str) -> None:
    """Mark a conflict resolved (``resolution``: what was kept); ``conflict`` if it was resolved already."""
    with _tx(conn):
        row = get(conn, conflict_id)
        if row["resolved_at"] is not None:
            raise KmsError(
                "conflict", f"conflict {conflict_id} was resolved already ({row['resolution']})", id=conflict_id
            )
        conn.execute(
            "UPDATE conflicts SET resolved_at = ?, resolution = ? WHERE id = ?", (time.time(), resolution, conflict_id)
        )


def sides(vault: Vault, row: dict) -> tuple[bytes | None, bytes | None]:
    """(mine, theirs) as they are now: the note's file and the copy's (a copy conflict), else the row's."""
    if row["copy_path"] is None:
        return row.get("mine"), row.get("theirs")
    return _read(vault.root / row["path"]), _read(vault.root / row["copy_path"])


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def settle_copies(conn: apsw.Connection, vault: Vault, copies: dict[str, CopyOf], notes: Container[str] = ()) -> None:
    """After a scan (inside the index's transaction): a conflict for each copy found that has none open, and
    the open copy conflicts whose copy is gone closed (``COPY_GONE``), or whose file the scan found a note now
    (``notes``: the vault's sync tool was corrected, ``NOT_A_COPY``). (A database not migrated to m052 yet,
    which only a test of an older schema indexes, has no conflicts to settle.)"""
    if not copies and conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'conflicts'").fetchone() is None:
        return
    known = {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT copy_path, id FROM conflicts WHERE vault_id = ? AND copy_path IS NOT NULL AND resolved_at IS NULL",
            (vault.id,),
        )
    }
    now = time.time()
    for path, copy in copies.items():
        if path not in known:
            conn.execute(
                "INSERT INTO conflicts(vault_id, path, copy_path, source, opened_at) VALUES (?, ?, ?, ?, ?)",
                (vault.id, copy.note, path, copy.source, now),
            )
    for path, cid in known.items():
        if path in copies:
            continue
        why = NOT_A_COPY if path in notes else COPY_GONE if not os.path.lexists(vault.root / path) else None
        if why is not None:
            conn.execute("UPDATE conflicts SET resolved_at = ?, resolution = ? WHERE id = ?", (now, why, cid))


def copy_changed(
    conn: apsw.Connection, vault: Vault, relpath: str, exists: Callable[[str], bool] | None = None
) -> bool:
    """The watcher saw ``relpath`` change: if its name is a conflict copy's, open (or, once the copy is gone,
    close) its conflict and say True: the file is not a note. False for a note."""
    names = names_for(vault)
    copy = names.copy_of(relpath, exists or (lambda p: os.path.isfile(vault.root / p)))
    if copy is None:
        return False
    with _tx(conn):
        if os.path.lexists(vault.root / relpath):
            settle_copies(conn, vault, {**_open_copies(conn, vault.id), relpath: copy})
        else:
            conn.execute(
                "UPDATE conflicts SET resolved_at = ?, resolution = ? "
                "WHERE vault_id = ? AND copy_path = ? AND resolved_at IS NULL",
                (time.time(), COPY_GONE, vault.id, relpath),
            )
    return True


def _open_copies(conn: apsw.Connection, vault_id: int) -> dict[str, CopyOf]:
    return {
        r[0]: CopyOf(r[2], r[1])
        for r in conn.execute(
            "SELECT copy_path, path, source FROM conflicts "
            "WHERE vault_id = ? AND copy_path IS NOT NULL AND resolved_at IS NULL",
            (vault_id,),
        )
    }


@contextlib.contextmanager
def _tx(conn: apsw.Connection) -> Iterator[None]:
    """The caller's transaction when one is open (the indexer's batch), else one of our own."""
    if conn.in_transaction:
        yield
    else:
        with write_tx(conn):
            yield


def check_target(conn: apsw.Connection, vault: Vault, relpath: str) -> None:
    """Refuse an agent's write to ``relpath`` (``WriteContext.check_write``, for every write point): ``conflict``
    while the note there has an open conflict (the agent would build on one side before the person chose), and
    ``invalid-input`` for a name that is a conflict copy's (kms would quarantine what it wrote)."""
    row = open_for(conn, vault.id, relpath)
    if row is not None:
        other = f" (its copy {row['copy_path']})" if row["copy_path"] else ""
        raise KmsError(
            "conflict",
            f"{relpath!r} has an open {row['source']} conflict{other}: two versions of it exist and the person has"
            f" not chosen yet (kms conflicts resolve {row['id']}); nothing was written",
            path=relpath,
            conflictId=row["id"],
        )
    copy = names_for(vault).copy_of(relpath, lambda p: os.path.isfile(vault.root / p))
    if copy is not None:
        raise KmsError(
            "invalid-input",
            f"{relpath!r} is named like a {copy.source} conflict copy of {copy.note!r}: kms would not index it as "
            "a note; choose another name",
            path=relpath,
        )


def for_agents(conn: apsw.Connection, scope: VaultScope, limit: int = 20) -> dict[str, Any]:
    """What an agent's ``kms_status`` says of the open conflicts: only those over a visible note of its vaults
    (a hidden note's name is never told), the note's id and path, and that writes to it are refused."""
    where, params = scope.sql("c.vault_id")
    found = rows(
        conn,
        "SELECT c.id, n.id AS noteId, v.name AS vault, c.path, c.source, c.opened_at AS openedAt FROM conflicts c "
        "JOIN notes n ON n.vault_id = c.vault_id AND n.path = c.path AND n.hidden_at IS NULL "
        f"JOIN vaults v ON v.id = c.vault_id WHERE c.resolved_at IS NULL{where} ORDER BY c.opened_at, c.id",
        params,
    )
    return {"count": len(found), "notes": found[:limit]}
