"""What keeps a vault in sync, told from real folders in tmp_path (``server.vault.sync_tools``), recorded at
``kms vault add`` and corrected by ``set_sync``."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest

from server.errors import KmsError
from server.store.registrations import read_registrations
from server.vault import sync_tools
from server.vault.registry import add_vault, get_vault, set_sync


def _folder(base: Path, rel: str, *marks: str) -> Path:
    root = base / rel
    root.mkdir(parents=True)
    for mark in marks:
        path = root / mark
        if mark.endswith("/"):
            path.mkdir(parents=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}" if mark.endswith(".json") else "", encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("rel", "marks", "want"),
    [
        ("plain/v", (), ()),
        ("repo/v", (".git/",), ("git",)),
        ("st/v", (".stfolder/",), ("syncthing",)),
        ("sti/v", (".stignore",), ("syncthing",)),
        ("os/v", (".obsidian/sync.json",), ("obsidian-sync",)),
        ("og/v", (".obsidian/plugins/obsidian-git/", ".git/"), ("git", "obsidian-git")),
        ("nc/v", (".sync_1a2b3c4d5e6f.db",), ("nextcloud",)),
        ("nc2/v", ("._sync_1a2b3c4d5e6f.db",), ("nextcloud",)),
        ("Dropbox/notes/v", (), ("dropbox",)),
        ("Dropbox (Acme)/v", (), ("dropbox",)),
        ("OneDrive - Contoso/v", (), ("onedrive",)),
        ("CloudStorage/OneDrive-Personal/v", (), ("onedrive",)),
        ("Library/Mobile Documents/iCloud~md~obsidian/Documents/v", (), ("icloud",)),
        ("iCloudDrive/v", (), ("icloud",)),
        ("Google Drive/My Drive/v", (), ("google-drive",)),
        ("CloudStorage/GoogleDrive-me@example.com/v", (), ("google-drive",)),
    ],
)
def test_each_tool_is_told_from_the_folder(tmp_path: Path, rel: str, marks: tuple[str, ...], want: tuple) -> None:
    assert sync_tools.detect(_folder(tmp_path, rel, *marks)) == want


def test_a_mark_in_a_folder_above_counts(tmp_path: Path) -> None:
    """A Syncthing folder or a git work tree whose root is above the vault (the vault is one of its folders)."""
    (tmp_path / "sync" / ".stfolder").mkdir(parents=True)
    (tmp_path / "sync" / ".git").write_text("gitdir: elsewhere\n")  # a worktree's link is a file
    assert sync_tools.detect(_folder(tmp_path, "sync/notes/v")) == ("git", "syncthing")


def test_obsidian_sync_by_its_core_plugin(tmp_path: Path) -> None:
    on = _folder(tmp_path, "a", ".obsidian/")
    (on / ".obsidian" / "core-plugins.json").write_text(json.dumps({"sync": True, "graph": True}))
    off = _folder(tmp_path, "b", ".obsidian/")
    (off / ".obsidian" / "core-plugins.json").write_text(json.dumps({"sync": False}))
    old = _folder(tmp_path, "c", ".obsidian/")
    (old / ".obsidian" / "core-plugins.json").write_text(json.dumps(["file-explorer", "sync"]))
    assert [sync_tools.detect(p) for p in (on, off, old)] == [("obsidian-sync",), (), ("obsidian-sync",)]


def test_vault_add_records_it_and_set_sync_corrects_it(conn: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    vault = add_vault(conn, _folder(tmp_path, "st/v", ".stfolder/"), "v")
    assert vault.sync == "syncthing"
    vault, changed = set_sync(conn, "v", "ICloud, git")
    assert changed and vault.sync == "git,icloud" and get_vault(conn, "v").sync == "git,icloud"
    assert set_sync(conn, "v", "icloud,git")[1] is False
    assert [v["sync"] for v in read_registrations(db_path)] == ["git,icloud"]  # kept beside the database too
    assert set_sync(conn, "v", "none")[0].sync == ""
    with pytest.raises(KmsError) as e:
        set_sync(conn, "v", "floppy")
    assert e.value.kind == "invalid-input" and get_vault(conn, "v").sync == ""


def test_a_vault_from_before_m053_is_looked_at_its_next_index(conn: apsw.Connection, tmp_path: Path) -> None:
    from server.index.indexer import index_vault
    from server.store.db import write_tx

    vault = add_vault(conn, _folder(tmp_path, "repo/v", ".git/"), "v")
    with write_tx(conn):
        conn.execute("UPDATE vaults SET sync = NULL")
    index_vault(conn, get_vault(conn, "v"))
    assert get_vault(conn, vault.id).sync == "git"


def test_upgrade_from_m043_adds_the_conflicts_table_and_looks_at_the_sync_tool_once(tmp_path: Path) -> None:
    """m052 and m053 on a database from before them: its vault's sync is unknown (NULL) until its next index
    looks; the conflicts table is there and empty."""
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.store.migrations import applied, migrate

    root = _folder(tmp_path, "st/v", ".stfolder/")
    old = apsw.Connection(str(tmp_path / "m043.db"))
    migrate(old, upto="m043_composed_name_keys")
    old.execute("INSERT INTO vaults(name, root, added_at, dialect) VALUES ('v', ?, 0, 'obsidian')", (str(root),))
    old.close()
    conn = connect(tmp_path / "m043.db")
    assert {"m052_conflicts", "m053_vault_sync"} <= set(applied(conn))
    assert get_vault(conn, "v").sync is None
    assert conn.execute("SELECT count(*) FROM conflicts").fetchone() == (0,)
    index_vault(conn, get_vault(conn, "v"))
    assert get_vault(conn, "v").sync == "syncthing"
