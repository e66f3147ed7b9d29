"""Rolling copies of the database, so a damaged file does not take what only it holds (docs/recovery.md).

The vaults rebuild the index, not the history, provenance or sessions. A copy is made with SQLite's
online backup (APSW ``Connection.backup``) from a read snapshot the copy holds open: other connections
write on meanwhile (WAL: a reader never blocks a writer) and the copy stays one consistent moment. It is
copied a few pages at a time with a pause between steps, on its own connections, so whatever thread runs
it never holds the interpreter or a lock for long. Copies live in ``<db>.backup/`` beside the database,
``keep`` of them (the oldest go first); none is made when the disk could not hold two more of it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

import apsw

from server.store.locks import lock_file

DAY_S = 86_400.0
STEP_PAGES = 16  # 256 KiB of 16 KiB pages per step
STEP_PAUSE_S = 0.002
_PREFIX, _SUFFIX = "kms-", ".db"


def backup_folder(db_path: str | Path) -> Path:
    db = Path(db_path)
    return db.with_name(db.name + ".backup")


def list_backups(db_path: str | Path) -> list[Path]:
    """The finished copies, newest first (a copy is named by the moment it was made)."""
    folder = backup_folder(db_path)
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.name.startswith(_PREFIX) and p.name.endswith(_SUFFIX)]
    return sorted(found, key=lambda p: p.name, reverse=True)


def backup_due(db_path: str | Path, every_s: float = DAY_S, now: float | None = None) -> bool:
    """The database exists and its newest copy is older than ``every_s`` (or there is none)."""
    db = Path(db_path)
    if not db.is_file() or not db.stat().st_size:
        return False
    newest = list_backups(db)
    if not newest:
        return True
    return (time.time() if now is None else now) - newest[0].stat().st_mtime >= every_s


def room_for(db_path: str | Path) -> bool:
    """The disk holds two more copies of the database (a copy never fills the disk the database needs)."""
    db = Path(db_path)
    size = db.stat().st_size + _wal_size(db)
    return shutil.disk_usage(db.parent).free > 2 * size


def _wal_size(db: Path) -> int:
    try:
        return os.stat(str(db) + "-wal").st_size
    except OSError:
        return 0


def make_backup(
    db_path: str | Path,
    *,
    keep: int = 3,
    every_s: float = 0.0,
    step_pages: int = STEP_PAGES,
    pause_s: float = STEP_PAUSE_S,
) -> Path | None:
    """Copy the database into its backup folder and drop the copies past ``keep``; the new copy's path,
    or None when the disk is too full for it, another process is copying it now, or (``every_s``) its
    newest copy is younger than that. A copy half made (a crash, a full disk) never counts: it is written
    under a temporary name and renamed once complete."""
    db = Path(db_path)
    folder = backup_folder(db)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with lock_file(folder / ".lock", wait=0):  # every kms mcp's watcher may find the copy due at once
            if (every_s and not backup_due(db, every_s)) or not room_for(db):
                return None
            for left in folder.glob("*.partial"):  # a copy a killed process left half made
                with contextlib.suppress(OSError):
                    left.unlink()
            return _copy(db, folder, keep, step_pages, pause_s)
    except TimeoutError:
        return None


def _copy(db: Path, folder: Path, keep: int, step_pages: int, pause_s: float) -> Path:
    now = time.time()
    name = f"{_PREFIX}{time.strftime('%Y%m%d-%H%M%S', time.gmtime(now))}-{int(now * 1e6) % 1_000_000:06d}{_SUFFIX}"
    final = folder / name
    partial = folder / (name + ".partial")
    src = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        src.set_busy_timeout(30_000)
        dest = apsw.Connection(str(partial))
        try:
            dest.execute("PRAGMA journal_mode=OFF")  # a new file, renamed only once whole: no journal needed
            dest.execute("PRAGMA synchronous=OFF")
            src.execute("BEGIN")
            src.execute("SELECT count(*) FROM sqlite_schema").fetchall()  # the snapshot the whole copy reads
            with dest.backup("main", src, "main") as copy:
                while not copy.done:
                    copy.step(step_pages)
                    if pause_s:
                        time.sleep(pause_s)
            src.execute("COMMIT")
            dest.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, readable read-only
        finally:
            dest.close()
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    finally:
        src.close()
    with open(partial, "rb") as f:  # on the disk before it is named a copy (the pragma above skipped syncs)
        os.fsync(f.fileno())
    os.replace(partial, final)
    for old in list_backups(db)[max(keep, 1) :]:
        with contextlib.suppress(OSError):
            old.unlink()
    return final


def newest_good_backup(db_path: str | Path) -> Path | None:
    """The newest copy SQLite's quick check finds whole (an older one stands in for a damaged newer one)."""
    for copy in list_backups(db_path):
        try:
            conn = apsw.Connection(str(copy), flags=apsw.SQLITE_OPEN_READONLY)
        except apsw.Error:
            continue
        try:
            if conn.execute("PRAGMA quick_check(1)").fetchall() == [("ok",)]:
                return copy
        except apsw.Error:
            continue
        finally:
            conn.close()
    return None
