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
from server.store.backup import DAY_S, backup_due, make_backup

log = logging.getLogger(__name__)
_running: dict[str, threading.Thread] = {}
_lock = threading.Lock()


def _settings() -> tuple[bool, int]:

    settings = load_settings(default_config_path(), env={}, has_vault=True)
    return bool(settings.get("backup.enabled")), int(settings.get("backup.keep"))


def backup_if_due(db_path: str | Path, *, every_s: float = DAY_S) -> Path | None:
    """Copy the database now if ``backup.enabled`` and its newest copy is older than ``every_s``; the copy,
    or None (not due, turned off, the disk too full). A failed copy is logged, never raised: the caller's
    own work is done and stands."""
    try:
        enabled, keep = _settings()
        if not enabled or not backup_due(db_path, every_s):
            return None
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
