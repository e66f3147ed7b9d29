"""Test vaults and notes: the packaged sample vault, real files, ids looked up in a real index."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import apsw

REPO = Path(__file__).resolve().parents[2]
SAMPLE_VAULT = REPO / "kmscli" / "sample_vault"


def note_id(conn: apsw.Connection, title: str) -> str:
    row = conn.execute("SELECT id FROM notes WHERE title = ?", (title,)).fetchall()
    assert row, f"no note titled {title!r}"
    return cast(str, row[0][0])


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")
    return path


def index_notes(conn: apsw.Connection, root: Path, notes: dict[str, str], name: str = "v") -> apsw.Connection:
    """A vault of these notes (path -> text) written under ``root``, registered as ``name`` and indexed."""
    from server.index.indexer import index_vault
    from server.vault.registry import add_vault

    root.mkdir(parents=True, exist_ok=True)
    for path, text in notes.items():
        write(root / path, text)
    index_vault(conn, add_vault(conn, root, name))
    return conn
