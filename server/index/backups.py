"""When the database is copied (``server.store.backup`` makes the copies): once a day, between calls.

The running service's watcher asks ``start_backup_if_due`` now and then; the copy runs on a thread of
its own with its own connections, a few pages a step, so no tool call waits on it (docs/recovery.md has
the figures). ``kms index`` asks ``backup_if_due`` and copies in the foreground, after its own work.
``backup.enabled`` turns both off; ``backup.keep`` is how many copies stay.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from server.config.settings import default_config_path, load_settings
from server.store.backup import DAY_S, backup_due, backup_folder, list_backups, make_backup

log = logging.getLogger(__name__)
_running: dict[str, threading.Thread] = {}
_lock = threading.Lock()


def _settings() -> tuple[bool, int]:

    settings = load_settings(default_config_path(), env={}, has_vault=True)
    return bool(settings.get("backup.enabled")), int(settings.get("backup.keep"))


def backup_if_due(db_path: str | Path, *, every_s: float = DAY_S, foreground: bool = False) -> Path | None:
    """Copy the database now if ``backup.enabled`` and its newest copy is older than ``every_s``; the copy,
    or None (not due, turned off, the disk too full). A failed copy is logged, never raised: the caller's
    own work is done and stands. ``foreground``: a command that waits for the copy (``kms index``) copies it
    in one step, without the pauses that leave a service's tool calls the interpreter (a third of the time
    on the bench's 10k notes)."""
    try:
        enabled, keep = _settings()
        if not enabled or not backup_due(db_path, every_s):
            return None
        if foreground:
            return make_backup(db_path, keep=keep, every_s=every_s, step_pages=-1, pause_s=0.0)
        return make_backup(db_path, keep=keep, every_s=every_s)
    except Exception:
        log.exception("backing up %s failed", db_path)
        return None


def start_backup_if_due(db_path: str | Path, *, every_s: float = DAY_S) -> threading.Thread | None:
    """``backup_if_due`` on a background thread (one at a time per database); the thread, if one started."""
    key = str(db_path)
    with _lock:
        running = _running.get(key)
        if running is not None and running.is_alive():
            return None
        try:
            enabled, _keep = _settings()
            if not enabled or not backup_due(db_path, every_s):
                return None
        except Exception:  # (a database folder gone from under a watcher): the watcher keeps watching
            log.exception("checking the backup of %s failed", db_path)
            return None
        thread = threading.Thread(target=backup_if_due, args=(db_path,), kwargs={"every_s": every_s}, daemon=True)
        thread.name = "kms-backup"
        _running[key] = thread
        thread.start()
        return thread


STALE_S = 2 * DAY_S  # a newest copy older than this is named by ``kms doctor``


def backup_report(db_path: str | Path, *, now: float) -> dict[str, object]:
    """For ``kms doctor``: whether copies are made, where, how many there are and how old the newest is, with
    a warning when none is recent (the service makes one a day while it runs, ``kms index`` one after its
    work: a machine where neither ran for days has none)."""
    enabled, keep = _settings()
    copies = list_backups(db_path)
    newest_at = copies[0].stat().st_mtime if copies else None
    warning = None
    if enabled and Path(db_path).is_file() and (newest_at is None or now - newest_at >= STALE_S):
        said = "there is no copy of the database yet" if newest_at is None else "the newest copy of the database"
        warning = (
            f"{said}{' is more than two days old' if newest_at is not None else ''}: copies are made once a day "
            "while the service runs, and by `kms index`"
        )
    return {
        "enabled": enabled,
        "keep": keep,
        "folder": str(backup_folder(db_path)),
        "copies": len(copies),
        "newestAt": newest_at,
        "warning": warning,
    }
