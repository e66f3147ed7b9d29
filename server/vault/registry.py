"""Registered vaults: a name and a root folder (``server.index.indexer.remove_vault`` forgets one
with its index rows; files are never touched), and the Dendron vaults each holds as its workspace's
``dendron.yml`` names them (``settle_workspace``, m032)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import apsw

from server.errors import KmsError
from server.store.db import rows, write_tx
from server.store.registrations import save_registrations
from server.vault import dendron, dialects, sync_tools
from server.vault.paths import name_key


@dataclass(frozen=True)
class Vault:
    id: int
    name: str
    root: Path
    added_at: float
    last_indexed_at: float | None
    dialect: str | None = None  # None: not detected yet (a vault registered before dialects)
    sync: str | None = None  # what keeps it in sync (``sync_tools``; '' none found, None not looked yet, m053)
    git_mode: str = "off"  # off, commit or sync (m054; ``server.writes.git_units``)

    @property
    def rules(self) -> dialects.Dialect:
        """The rules its notes are read by."""
        return dialects.get(self.dialect)


GIT_MODES = ("off", "commit", "sync")


def _vault(row: dict) -> Vault:
    return Vault(
        row["id"],
        row["name"],
        Path(row["root"]),
        row["added_at"],
        row["last_indexed_at"],
        row.get("dialect"),
        row.get("sync"),
        row.get("git_mode") or "off",
    )


def list_vaults(conn: apsw.Connection) -> list[Vault]:
    return [_vault(r) for r in rows(conn, "SELECT * FROM vaults ORDER BY name")]


def get_vault(conn: apsw.Connection, name_or_id: str | int) -> Vault:
    found = rows(conn, "SELECT * FROM vaults WHERE name = ? OR CAST(id AS TEXT) = ?", (str(name_or_id),) * 2)
    if not found:
        names = [v.name for v in list_vaults(conn)]
        raise KmsError("not-found", f"no vault named {name_or_id!r}; vaults: {', '.join(names) or 'none'}")
    return _vault(found[0])


def vault_at(conn: apsw.Connection, path: str | Path) -> Vault | None:
    """The vault registered at ``path``'s folder, if one is."""
    root = Path(path).expanduser().resolve()
    return next((v for v in list_vaults(conn) if v.root == root), None)


def add_vault(
    conn: apsw.Connection,
    path: str | Path,
    name: str | None = None,
    dialect: str | None = None,
    sync_tool: str | None = None,
) -> Vault:
    """Register a folder; its dialect is ``dialect``, else what its files declare (``dialects.detect``); what
    keeps it in sync is ``sync_tool`` (``sync_tools.parse``), else what the folder shows (``sync_tools.detect``).

    Refused: an empty path (never "the current folder" by accident), and a folder inside a registered
    vault or holding one (its notes would be indexed twice, each twice in every search)."""
    if isinstance(path, str) and not path.strip():
        raise KmsError("invalid-input", "give the vault's folder (an empty path is not one; '.' is this folder)")
    root = Path(path).expanduser().resolve()
    if not root.exists():
        raise KmsError("not-found", f"no folder at {root}")
    if not root.is_dir():
        raise KmsError("invalid-input", f"{root} is a file, not a folder: give the folder that holds the notes")
    rules = dialects.get(dialect) if dialect is not None else dialects.detect(root)
    sync = sync_tools.parse(sync_tool) if sync_tool is not None else ",".join(sync_tools.detect(root))
    if name is not None and not name.strip():
        raise KmsError("invalid-input", "an empty vault name; leave the name out to take the folder's")
    name = name or re.sub(r"[^\w.-]+", "-", root.name).strip("-") or "vault"
    if not re.fullmatch(r"[\w][\w.-]{0,63}", name):
        raise KmsError(
            "invalid-input",
            f"{name!r} is no vault name: 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'",
        )
    with write_tx(conn):
        for v in list_vaults(conn):
            if v.root == root:
                raise KmsError("already-exists", f"{root} is already registered as vault {v.name!r}")
            if v.name == name:
                raise KmsError("already-exists", f"a vault named {name!r} exists; choose another with --name")
            if root.is_relative_to(v.root) or v.root.is_relative_to(root):
                inside = root.is_relative_to(v.root)
                why = (
                    f"{root} is inside vault {v.name!r} ({v.root}), which indexes its notes already"
                    if inside
                    else f"{root} holds vault {v.name!r} ({v.root}): its notes would be indexed twice"
                )
                raise KmsError(
                    "invalid-input",
                    f"{why}; to register this folder instead, first run: kms vault remove {v.name}",
                    vault=v.name,
                    nested="inside" if inside else "holds",
                )
        conn.execute(
            "INSERT INTO vaults(name, root, added_at, dialect) VALUES (?, ?, ?, ?)",
            (name, str(root), time.time(), rules.name),
        )
        if has_sync(conn):  # (a database before m053 has no sync: only a test of an older schema)
            conn.execute("UPDATE vaults SET sync = ? WHERE id = ?", (sync, conn.last_insert_rowid()))
        _write_workspace(conn, get_vault(conn, name).id, _workspace_rows(dendron.find(root)))
    save_registrations(conn)
    return get_vault(conn, name)


def set_dialect(conn: apsw.Connection, name: str, dialect: str) -> tuple[Vault, bool]:
    """Give a vault another dialect; (the vault, whether it changed: then its notes must be parsed again)."""
    vault = get_vault(conn, name)
    rules = dialects.get(dialect)
    if vault.dialect == rules.name:
        return vault, False
    with write_tx(conn):
        conn.execute("UPDATE vaults SET dialect = ? WHERE id = ?", (rules.name, vault.id))
    save_registrations(conn)
    return get_vault(conn, name), True


def set_sync(conn: apsw.Connection, name: str, value: str) -> tuple[Vault, bool]:
    """Say what keeps a vault in sync (``kms vault set NAME sync=...``: ``sync_tools.parse``'s grammar); (the
    vault, whether it changed: then its file names are read again, iCloud's and OneDrive's copies differ)."""
    vault = get_vault(conn, name)
    stored = sync_tools.parse(value)
    if vault.sync == stored:
        return vault, False
    with write_tx(conn):
        conn.execute("UPDATE vaults SET sync = ? WHERE id = ?", (stored, vault.id))
    save_registrations(conn)
    return get_vault(conn, name), True


def set_git_mode(conn: apsw.Connection, name: str, mode: str) -> tuple[Vault, bool]:
    """Turn a vault's git mode to ``mode`` (``GIT_MODES``); (the vault, whether it changed). Checking that the
    folder is in a git work tree is the caller's (``server.vault.git.open_repo``), before this."""
    if mode not in GIT_MODES:
        raise KmsError("invalid-input", f"git mode must be one of {', '.join(GIT_MODES)}, not {mode!r}")
    vault = get_vault(conn, name)
    if vault.git_mode == mode:
        return vault, False
    with write_tx(conn):
        conn.execute("UPDATE vaults SET git_mode = ? WHERE id = ?", (None if mode == "off" else mode, vault.id))
    save_registrations(conn)
    return get_vault(conn, name), True


def has_sync(conn: apsw.Connection) -> bool:
    """Whether the database records vaults' sync tools (m053); only a test of an older schema has none."""
    return any(r[1] == "sync" for r in conn.execute("PRAGMA table_info(vaults)"))


def settle_sync(conn: apsw.Connection, vault: Vault) -> Vault:
    """A vault registered before m053 gets the sync tools its folder shows (looked once, at its next index)."""
    if vault.sync is not None or not has_sync(conn):
        return vault
    found = ",".join(sync_tools.detect(vault.root))
    with write_tx(conn):
        conn.execute("UPDATE vaults SET sync = ? WHERE id = ? AND sync IS NULL", (found, vault.id))
    save_registrations(conn)
    return get_vault(conn, vault.id)


def settle_dialect(conn: apsw.Connection, vault: Vault) -> tuple[Vault, bool]:
    """A vault registered before dialects gets the one its files declare; (vault, whether it was unset)."""
    if vault.dialect is not None:
        return vault, False
    detected = dialects.detect(vault.root)
    with write_tx(conn):
        conn.execute("UPDATE vaults SET dialect = ? WHERE id = ? AND dialect IS NULL", (detected.name, vault.id))
    save_registrations(conn)
    return get_vault(conn, vault.id), True


WorkspaceRow = tuple[str, str, str, str]  # dendron_vaults: name, folder, key_prefix, workspace


def _workspace_rows(found: dendron.Found | None) -> list[WorkspaceRow]:
    if found is None:
        return []
    ws = str(found.workspace.root)
    return sorted((name, folder, f"{name_key(folder)}/" if folder else "", ws) for name, folder in found.inside)


def _write_workspace(conn: apsw.Connection, vault_id: int, want: list[WorkspaceRow]) -> None:
    conn.execute("DELETE FROM dendron_vaults WHERE vault_id = ?", (vault_id,))
    conn.executemany(
        "INSERT INTO dendron_vaults(vault_id, name, folder, key_prefix, workspace) VALUES (?, ?, ?, ?, ?)",
        [(vault_id, *row) for row in want],
    )


def settle_workspace(conn: apsw.Connection, vault: Vault) -> bool:
    """The vault's Dendron vaults (m032) as its workspace's ``dendron.yml`` names them now (read on every
    index: a vault registered before m032 gains them, an edited dendron.yml is followed). True when they
    changed: then the links that name a vault must be resolved again."""
    want = _workspace_rows(dendron.find(vault.root))
    have = [
        (r[0], r[1], r[2], r[3])
        for r in conn.execute(
            "SELECT name, folder, key_prefix, workspace FROM dendron_vaults WHERE vault_id = ? ORDER BY name",
            (vault.id,),
        )
    ]
    if want == have:
        return False
    with write_tx(conn):
        _write_workspace(conn, vault.id, want)
    return True
