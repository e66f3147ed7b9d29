"""Keep the index in sync with file changes (debounced), for editors and humans beside agents."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import apsw

from server.index import conflicts
from server.index.backups import start_backup_if_due
from server.index.git_sync import start_sync_if_due, sync_timings
from server.index.incremental import reindex_file
from server.index.indexer import index_vault
from server.index.link_resolve import add_attachments
from server.index.privacy import KMSIGNORE, refresh
from server.store.db import connect, write_tx
from server.store.locks import wait_own_writes
from server.vault.paths import is_note_path
from server.vault.registry import Vault, list_vaults

DEBOUNCE_MS = 150
BACKUP_CHECK_S = 60.0  # how often a watcher asks whether the daily copy of the database is due
# the copy starts only once the vault's files have been still this long: between calls, not during a burst of
# writes (started with the first batch, a new service's first copy ran under the agent's first writes, which
# then took up to 55 ms; bench_mcp's appends were slower while it ran)
BACKUP_QUIET_S = 30.0
GIT_SYNC_CHECK_S = 5.0  # how often an idle watcher asks whether a vault in git mode ``sync`` is due (``git_sync``)
RULES_CHECK_MS = 2000  # how often a watcher looks for a privacy rule change made outside any vault file
log = logging.getLogger("kms.watcher")
# after re-indexing: (conn, vault, the vault's changed notes) -> rows changed; e.g. the check that a
# save dropped an agent's write (``server.activity.overwrites.check``, a layer above the index)
AfterIndex = Callable[[apsw.Connection, Vault, list[str]], int]


def _in_vault(vault: Vault, path: str, real_root: Path | None = None) -> str | None:
    """Vault-relative path of anything outside dot-folders, else None (``real_root``: the vault
    root already resolved, for callers that check many paths)."""
    try:
        rel = Path(path).resolve().relative_to(real_root or vault.root.resolve()).as_posix()
    except ValueError:
        return None
    if rel == "." or any(part.startswith(".") for part in rel.split("/")):
        return None
    return rel


def _mine(vault: Vault, paths: set[str], real_root: Path) -> list[tuple[str, str]]:
    """(path, vault-relative path) of the changed paths inside ``vault`` outside dot-folders, as
    ``_in_vault`` gives them, but cheap for the thousands of events a kms rename makes: dot-named
    paths (kms's own temp files) are dropped by name, and each folder is resolved once, not each
    file in it (a file that is itself a link is still resolved on its own)."""
    out: list[tuple[str, str]] = []
    folders: dict[str, str | None] = {}
    for p in paths:
        folder, name = os.path.split(p)
        if name.startswith("."):
            continue  # never indexed (.kmsignore is read by apply_changes itself)
        if folder not in folders:
            folders[folder] = _in_vault(vault, folder, real_root) if folder else None
            if folder and folders[folder] is None and Path(folder).resolve() == real_root:
                folders[folder] = ""  # the vault's own top folder
        base = folders[folder]
        if base is None or os.path.islink(p):
            rel = _in_vault(vault, p, real_root) if os.path.islink(p) else None
        else:
            rel = f"{base}/{name}" if base else name
        if rel is not None:
            out.append((p, rel))
    return out


def _relevant(vault: Vault, path: str) -> str | None:
    """Vault-relative path of a Markdown file outside dot-folders, else None."""
    rel = _in_vault(vault, path)
    return rel if rel is not None and is_note_path(rel) else None


def apply_changes(conn, vaults: list[Vault], paths: set[str], after: AfterIndex | None = None) -> int:
    """Re-index what changed; return how many changed paths were relevant.

    A path that is gone (and still indexed: not a move kms made itself) or is a folder means a delete,
    a rename or a moved folder: the vault gets an incremental ``index_vault``, which recognises a
    rename by content hash and so keeps the note's id and hidden stamp (re-indexing the two paths one
    by one would forget the old note and make a new, visible one). Otherwise each changed note is
    re-indexed on its own. ``after`` then sees the vault's changed notes (as re-indexed).
    """
    n = 0
    for vault in vaults:
        real_root = vault.root.resolve()
        if any(Path(p).name == KMSIGNORE and Path(p).parent.resolve() == real_root for p in paths):
            n += int(refresh(conn, vault.id, vault.root))  # the person edited their privacy rules
        mine = _mine(vault, paths, real_root)
        if not mine:
            continue
        notes = [rel for _p, rel in mine if is_note_path(rel)]
        gone = [rel for p, rel in mine if not os.path.lexists(p)]
        structural = (
            any(os.path.isdir(p) for p, _rel in mine)
            or bool(gone)
            and (any(not is_note_path(rel) for rel in gone) or _still_indexed(conn, vault.id, gone))
        )
        if structural:
            index_vault(conn, vault, how="watch")
            n += max(1, len(notes))
        else:
            for rel in notes:
                reindex_file(conn, vault, rel)
                n += 1
            files = [
                rel
                for p, rel in mine
                if not is_note_path(rel)
                and not os.path.islink(p)
                and os.path.isfile(p)
                and not (rel.endswith(".orig") and conflicts.copy_changed(conn, vault, rel))  # git's, no attachment
            ]  # a new attachment (a pasted image): links naming it resolve now
            if files:
                with write_tx(conn):
                    n += len(files) if add_attachments(conn, vault.id, files) else 0
        if after is not None and notes:
            after(conn, vault, notes)
    return n


def _still_indexed(conn, vault_id: int, gone: list[str]) -> bool:
    """Whether the index still has a note at (or under) one of these vanished paths. Asked under the
    write lock: a kms move, rename or trash holds it from its first rename until the notes' rows have
    moved, so the answer waits for that, and kms's own moves then cost the watcher a stat and a hash
    per file instead of a scan of the whole vault (a person's move is still indexed, so it is one)."""
    with write_tx(conn):
        return any(
            conn.execute(
                "SELECT 1 FROM notes WHERE vault_id = ? AND (path = ? OR path >= ? AND path < ?) LIMIT 1",
                (vault_id, rel, rel + "/", rel + "0"),
            ).fetchall()
            for rel in gone
        )


# how often an idle watcher looks for a vault added, removed or changed (kms vault add|remove|set); it looks
# before every batch of changes too (one small query), so none is applied to a vault removed meanwhile
REGISTRY_CHECK_MS = 500


def _registered(conn: apsw.Connection, vault: str | None) -> list[Vault]:
    return [v for v in list_vaults(conn) if vault is None or v.name == vault]


def _shape(vaults: list[Vault]) -> list[tuple[int, str, Path, str | None, str | None]]:
    """What a watcher depends on in the registry: which vaults, where, read by which rules and which sync
    tool's copy names (not the time each
    was last indexed, which every index changes)."""
    return [(v.id, v.name, v.root, v.dialect, v.sync) for v in vaults]


def watch_vaults(
    db_path: str | Path,
    *,
    vault: str | None = None,
    on_change: Callable[[int, float], None] | None = None,
    stop: threading.Event | None = None,
    after: AfterIndex | None = None,
    backup_quiet_s: float = BACKUP_QUIET_S,
) -> None:
    """Block, re-indexing changed notes as they change, until ``stop`` is set (or Ctrl-C).

    The registry is read again every ``REGISTRY_CHECK_MS``: a vault added, removed or given other rules while
    this runs (another process's ``kms vault add``) is watched, or no longer, from then on. The watcher looks
    rather than being told, so it follows every way the registry changes (any process, any command) with no
    channel between them; the look is one small query. After such a change the watch starts again over the
    vaults registered then, with the same catch-up scan as at start (what changed while no watch ran)."""
    stop = stop or threading.Event()
    conn = connect(db_path)
    while not stop.is_set():
        vaults = _registered(conn, vault)
        if not [v for v in vaults if v.root.is_dir()]:  # nothing to watch yet: wait for a vault to come
            while _shape(_registered(conn, vault)) == _shape(vaults):
                if stop.wait(REGISTRY_CHECK_MS / 1000):
                    return
            continue
        _watch_until_registry_changes(conn, db_path, vault, vaults, on_change, stop, after, backup_quiet_s)


def _watch_until_registry_changes(
    conn: apsw.Connection,
    db_path: str | Path,
    vault: str | None,
    vaults: list[Vault],
    on_change: Callable[[int, float], None] | None,
    stop: threading.Event,
    after: AfterIndex | None,
    backup_quiet_s: float,
) -> None:
    """Watch ``vaults`` until ``stop`` is set or the registry no longer says ``vaults``; the daily copy of the
    database once the files have been still ``backup_quiet_s``."""
    # deferred: watchfiles only while watching; the CLI's index commands import this module
    from watchfiles import watch

    roots = [str(v.root) for v in vaults if v.root.is_dir()]
    for v in vaults:
        refresh(conn, v.id, v.root)
    checked = time.perf_counter()
    backup_checked = checked - BACKUP_CHECK_S  # (so a service that starts makes an overdue copy soon)
    sync_checked = checked
    step_aside_s = sync_timings().step_aside_s  # (read again at each look for a due sync)
    last_change = checked
    caught_up = False
    for changes in watch(
        *roots, debounce=DEBOUNCE_MS, step=50, stop_event=stop, yield_on_timeout=True, rust_timeout=REGISTRY_CHECK_MS
    ):
        if _shape(_registered(conn, vault)) != _shape(vaults):  # before a batch is applied to a vault now gone
            return  # watched again over the vaults registered now (this batch's changes: caught up then)
        wait_own_writes(step_aside_s)  # this process rewriting several files (a git sync): taken in after it
        started = time.perf_counter()
        try:
            n = apply_changes(conn, vaults, {p for _change, p in changes}, after) if changes else 0
            if not caught_up:  # the watch is set up now: what changed before it (while no watcher ran, or
                caught_up = True  # in the moment the server took to start) reports no event, a scan finds it
                n += sum(index_vault(conn, v).changed for v in vaults)
            if started - checked >= RULES_CHECK_MS / 1000:  # the settings file's privacy rules may have changed
                checked = started
                n += sum(refresh(conn, v.id, v.root) for v in vaults)
        except Exception:  # e.g. the DB busy beyond the timeout: keep watching, the next change retries
            log.exception("re-indexing %d changed path(s) failed", len(changes))
            continue
        if n and on_change:
            on_change(n, time.perf_counter() - started)
        if changes:
            last_change = started
        elif started - last_change >= backup_quiet_s and started - backup_checked >= BACKUP_CHECK_S:
            backup_checked = started  # on a thread of its own, while the files are still: no call waits on it
            start_backup_if_due(db_path)
        if not changes and started - sync_checked >= GIT_SYNC_CHECK_S:
            sync_checked = started  # fetch, merge and push on a thread of its own, once writes are idle
            timings = sync_timings()
            step_aside_s = timings.step_aside_s
            start_sync_if_due(db_path, every_s=timings.every_s, idle_s=timings.quiet_s)
