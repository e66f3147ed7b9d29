"""Keep the index in sync with file changes (debounced), for editors and humans beside agents."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from server.db import connect
from server.indexer import reindex_file
from server.vaults import Vault, list_vaults

DEBOUNCE_MS = 150


def _relevant(vault: Vault, path: str) -> str | None:
    """Vault-relative path of a Markdown file outside dot-folders, else None."""
    try:
        rel = Path(path).resolve().relative_to(vault.root.resolve()).as_posix()
    except ValueError:
        return None
    if not rel.lower().endswith(".md") or any(part.startswith(".") for part in rel.split("/")):
        return None
    return rel


def apply_changes(conn, vaults: list[Vault], paths: set[str]) -> int:
    n = 0
    for path in paths:
        for vault in vaults:
            rel = _relevant(vault, path)
            if rel is not None:
                reindex_file(conn, vault, rel)
                n += 1
                break
    return n


def watch_vaults(db_path: str | Path, *, vault: str | None = None,
                 on_change: Callable[[int, float], None] | None = None,
                 stop: threading.Event | None = None) -> None:
    """Block, re-indexing changed notes as they change, until ``stop`` is set (or Ctrl-C)."""
    from watchfiles import watch

    conn = connect(db_path)
    vaults = [v for v in list_vaults(conn) if vault is None or v.name == vault]
    roots = [str(v.root) for v in vaults if v.root.is_dir()]
    if not roots:
        return
    for changes in watch(*roots, debounce=DEBOUNCE_MS, step=50, stop_event=stop, yield_on_timeout=False):
        started = time.perf_counter()
        n = apply_changes(conn, vaults, {p for _change, p in changes})
        if n and on_change:
            on_change(n, time.perf_counter() - started)
