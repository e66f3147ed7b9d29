"""``kms revert`` and ``kms trash list|restore|empty`` in process: previews, confirmation, exits."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import apsw
import pytest
from support.cli import kms, ok, refused, said
from support.organize import assert_index_is_fresh, index, make_vault, vault_bytes
from support.vaults import note_id


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    return index(conn, make_vault(tmp_path / "v")).root


def agent(db_path: Path, tool: str, args: dict) -> dict:
    """One call through the real dispatcher and write guard of an agent session with every tier on."""
    from server.config.session_contract import SessionConfig
    from server.mcp.tools.dispatch import ToolRunner

    cfg = SessionConfig.from_env(
        {"KMS_DB_PATH": str(db_path), "KMS_CONFIG": os.environ["KMS_CONFIG"]},
        watch=False,
        write_enabled=True,
        edit_enabled=True,
        organize_enabled=True,
    )
    runner = ToolRunner(cfg)
    try:
        result, is_error = runner.call(tool, args)
    finally:
        runner.close()
    assert not is_error, result
    return result


def test_revert_shows_every_file_asks_and_reverts_as_one_unit(
    vault: Path, conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    before = vault_bytes(vault)
    out = agent(db_path, "kms_rename", {"noteId": note_id(conn, "Target"), "title": "Goal"})
    inv = str(out["invocationId"])
    declined = refused(kms("revert", inv, input="n\n"), 1)
    assert "notes/Goal.md → notes/Target.md" in declined.stdout and "+title [[Goal]]," in declined.stdout
    assert "nothing changed" in declined.stdout
    assert "private/Secret.md" in declined.stdout  # the person sees their hidden notes too
    assert vault_bytes(vault) != before
    done = ok(kms("revert", inv, "--yes"))
    assert f"reverted #{inv}" in said(done.stdout)
    assert vault_bytes(vault) == before
    assert_index_is_fresh(conn, vault, tmp_path)
    again = refused(kms("revert", inv, "--yes"), 2)
    assert "already reverted" in said(again.stderr)
    refused(kms("revert", "999", "--yes"), 3)


def test_revert_refuses_when_a_file_changed_since(vault: Path, conn: apsw.Connection, db_path: Path) -> None:
    out = agent(db_path, "kms_move", {"noteId": note_id(conn, "Target"), "folder": "archive"})
    (vault / "Linker.md").write_text("rewritten by the person\n")
    now = vault_bytes(vault)
    result = refused(kms("revert", str(out["invocationId"]), "--yes"), 1)
    error = said(result.stderr)  # the preview on stdout, the refusal on stderr as every error
    assert error.startswith("error (conflict): can't revert:") and "Linker.md was edited since" in error
    assert vault_bytes(vault) == now


def test_trash_list_restore_and_empty(vault: Path, conn: apsw.Connection, db_path: Path) -> None:
    nid = note_id(conn, "Target")
    agent(db_path, "kms_trash", {"noteId": nid})
    agent(db_path, "kms_trash", {"noteId": note_id(conn, "Other")})
    listed = json.loads(ok(kms("trash", "list", "--json")).stdout)
    assert sorted(t["path"] for t in listed) == ["Other.md", "notes/Target.md"]
    assert {t["trashedBy"]["actor"] for t in listed} == {"agent"}  # which session's call trashed it
    ok(kms("trash", "restore", "notes/Target.md"))
    assert (vault / "notes/Target.md").exists() and not (vault / ".trash/notes/Target.md").exists()
    assert conn.execute("SELECT id FROM notes WHERE path = 'notes/Target.md'").fetchall() == [(nid,)]
    refused(kms("trash", "restore", "Nothing"), 3)
    (vault / ".trash/notes").mkdir(parents=True, exist_ok=True)
    (vault / ".trash/notes/Fresh.md").write_text("trashed just now\n")
    assert "nothing deleted" in refused(kms("trash", "empty", input="n\n"), 1).stdout
    assert (vault / ".trash/Other.md").exists()
    refused(kms("trash", "empty", "--older-than", "soon", "--yes"), 2)
    ok(kms("trash", "empty", "--yes"))
    assert "The trash is empty." in ok(kms("trash", "list")).stdout


def test_trash_empty_older_than_dates_a_note_by_its_move_not_its_last_edit(vault: Path) -> None:
    """A rename into .trash/ (Obsidian, a person) keeps the mtime: a note last edited long ago and
    trashed now is not 'older than 30d' (finding: it was deleted for good)."""
    old = time.time() - 400 * 86400
    os.utime(vault / "Other.md", (old, old))
    before = time.time()
    (vault / ".trash").mkdir(exist_ok=True)
    os.rename(vault / "Other.md", vault / ".trash/Other.md")
    (listed,) = json.loads(ok(kms("trash", "list", "--json")).stdout)
    assert listed["trashedAt"] >= before - 1
    assert "Nothing to delete." in ok(kms("trash", "empty", "--older-than", "30d", "--yes")).stdout
    assert (vault / ".trash/Other.md").exists()
