"""``kms session undo`` with notes the session changed outside kms (issue 28): the preview lists them as such
(note, "outside edit reported by the session", size change), the undo restores them byte for byte with the
session's kms writes, and a note changed since the preview is refused (named, the others restored)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import apsw
from support.cli import kms, ok, refused, said
from support.outside import agent_tool, someone_else
from support.writes import Writer

from server.activity import session_material
from server.activity.session_registry import start_session
from server.vault.registry import get_vault

SID = "s-cli-outside"


def test_session_undo_previews_and_restores_outside_edits_with_the_kms_writes(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    home, recipe = vault_dir / "Home.md", vault_dir / "reference" / "Shakshuka.md"
    home_before, recipe_before = home.read_bytes(), recipe.read_bytes()
    start_session(indexed, kind="launcher", session_id=SID)
    from support.vaults import note_id

    Writer(db_path, SID).append(note_id(indexed, "Shakshuka"), "a kms line")
    vault = get_vault(indexed, "sample")
    agent_tool(indexed, vault, SID, "Home.md", home_before.replace(b"\n", b"\r\n", 1) + b"outside line\n")
    agent_tool(indexed, vault, SID, "drafts/Scratch.md", b"# Scratch\n\nby the agent's Write\n", tool="Write")

    shown = said(kms("session", "undo", SID, input="n\n").stdout)
    assert "sample:Home.md · outside edit reported by the session (Edit)" in shown
    assert f"back to version 1, {len(home_before) - len(home.read_bytes()):+d} bytes" in shown
    assert "sample:drafts/Scratch.md · outside edit reported by the session (Write)" in shown
    assert "to the trash (the session created it)" in shown
    assert "Revert 1 change(s) and restore 2 note(s) changed outside kms?" in shown
    assert "nothing changed" in shown and home.read_bytes() != home_before

    done = json.loads(ok(kms("session", "undo", SID, "--yes", "--json")).stdout)
    assert len(done["reverted"]) == 1 and len(done["restored"]) == 2 and done["notRestored"] == []
    assert home.read_bytes() == home_before and recipe.read_bytes() == recipe_before
    assert not (vault_dir / "drafts" / "Scratch.md").exists()
    assert (vault_dir / ".trash" / "drafts" / "Scratch.md").is_file()
    [(n,)] = indexed.execute(
        "SELECT count(*) FROM tool_invocations WHERE tool = 'restore' AND actor = 'person' AND status = 'success'"
    ).fetchall()
    assert n == 2
    assert "Nothing to revert." in ok(kms("session", "undo", SID, "--yes")).stdout


def test_a_note_saved_after_the_sessions_edit_is_named_and_left_alone(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    home = vault_dir / "Home.md"
    start_session(indexed, kind="launcher", session_id=SID)
    vault = get_vault(indexed, "sample")
    agent_tool(indexed, vault, SID, "Home.md", home.read_bytes() + b"outside line\n")
    session_material.record_event(  # the report came long ago: the person's save below is not the session's
        indexed,
        SID,
        {"hook_event_name": "Stop"},
        now=time.time(),
    )
    indexed.execute("UPDATE session_files SET at = at - 100 WHERE session_id = ?", (SID,))
    someone_else(indexed, vault, "Home.md", home.read_bytes() + b"the person's line\n")
    out = said(refused(kms("session", "undo", SID, "--yes"), 1).stdout)
    assert "✗ sample:Home.md · outside edit reported by the session (Edit)" in out
    assert "changed after the session's edit by outside kms" in out and "Nothing to revert." in out
    assert home.read_bytes().endswith(b"outside line\nthe person's line\n")
