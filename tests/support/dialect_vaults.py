"""The small test vaults written in each dialect (``tests/data/vaults/<dialect>``), copied to a
temporary folder with every file at one mtime, as a git checkout leaves them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import apsw

from support.vaults import REPO

DIALECT_VAULTS = REPO / "tests" / "data" / "vaults"
CHECKOUT_NS = 1_750_000_000_000_000_000  # one mtime for every file (2025-06-15)


def checkout(name: str, dest: Path) -> Path:
    """A copy of the test vault ``name`` at ``dest``, every file dated ``CHECKOUT_NS``."""
    shutil.copytree(DIALECT_VAULTS / name, dest)
    for dirpath, _dirs, files in os.walk(dest):
        for f in files:
            os.utime(os.path.join(dirpath, f), ns=(CHECKOUT_NS, CHECKOUT_NS))
    return dest


def add_indexed(
    conn: apsw.Connection, name: str, dest: Path, vault_name: str | None = None, dialect: str | None = None
) -> Any:
    """Check out the test vault ``name``, register it (dialect detected unless given) and index it;
    returns the ``Vault``."""
    from server.index.indexer import index_vault
    from server.vault.registry import add_vault

    vault = add_vault(conn, checkout(name, dest), vault_name or name, dialect)
    report = index_vault(conn, vault)
    assert not report.errors, report.errors
    return vault


def by_path(conn: apsw.Connection, vault: str, path: str) -> str:
    """The note id of ``vault:path``."""
    row = conn.execute(
        "SELECT n.id FROM notes n JOIN vaults v ON v.id = n.vault_id WHERE v.name = ? AND n.path = ?", (vault, path)
    ).fetchall()
    assert row, f"no note {vault}:{path}"
    return str(row[0][0])


def backlink_paths(conn: apsw.Connection, vault: str, path: str) -> list[str]:
    from server.index.listing import backlinks

    return sorted(b["path"] for b in backlinks(conn, by_path(conn, vault, path), limit=100))
