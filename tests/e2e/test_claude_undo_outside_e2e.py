"""End to end with the REAL Claude Code through ``kms claude`` (issue 28): the agent changes notes with its own
tools (an Edit of a note, a Write of a new one; its PostToolUse hooks report them to kms), then
``kms session undo`` lists them in its preview as outside edits reported by the session and restores the
note byte for byte and moves the new one to kms's trash. The Messages API is the local stand-in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from support.claude_cli import claude_bin, claude_env, run_headless
from support.fake_anthropic import ScriptedAnthropic
from support.sql import tuples

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(300)
def test_session_undo_restores_what_the_agent_changed_with_its_own_edit_tool(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    claude = claude_bin()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    note = vault_dir / "inbox" / "Quick capture.md"
    before = note.read_bytes()
    old_line = note.read_text().splitlines()[-1]
    created = vault_dir / "inbox" / "Agent scratch.md"
    script = [
        ("Read", {"file_path": str(note)}),  # the host's Edit edits only a file it has read
        ("Edit", {"file_path": str(note), "old_string": old_line, "new_string": old_line + " (edited by the agent)"}),
        ("Write", {"file_path": str(created), "content": "# Agent scratch\n\nwritten with the Write tool\n"}),
    ]
    args = ["-p", "Tidy my quick capture", "--output-format", "stream-json", "--verbose"]
    with ScriptedAnthropic(script=script, final="Tidied.") as api:
        env = claude_env(
            api.base_url,
            home,
            KMS_CLAUDE_BIN=str(claude),
            KMS_DB_PATH=str(db_path),
            KMS_CONFIG=str(tmp_path / "config.toml"),
            KMS_SERVICE_USE="0",
            ENABLE_TOOL_SEARCH="false",
        )
        proc = run_headless(
            [sys.executable, "-m", "kmscli", "claude", "--", *args, "--allowedTools", "mcp__kms,Read,Edit,Write"],
            env=env,
            cwd=work,
        )
    debug = f"rc={proc.returncode}\n{api.describe()}\nstderr:\n{proc.stderr[-3000:]}\nstdout:\n{proc.stdout[-2000:]}"
    assert proc.returncode == 0, debug
    assert note.read_bytes() != before and created.is_file(), debug  # the agent's own tools changed the vault
    [(sid,)] = tuples(indexed, "SELECT id FROM sessions WHERE kind = 'launcher'")
    reported = tuples(indexed, "SELECT tool, path FROM session_files WHERE session_id = ? ORDER BY id", (sid,))
    assert reported == [("Edit", "inbox/Quick capture.md"), ("Write", "inbox/Agent scratch.md")], debug

    def kms(*a: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kmscli", *a], env=env, input=stdin, capture_output=True, text=True, timeout=60
        )

    shown = kms("session", "undo", sid, stdin="n\n")
    assert "sample:inbox/Quick capture.md · outside edit reported by the session (Edit)" in shown.stdout, shown
    assert "back to version 1" in shown.stdout and "to the trash (the session created it)" in shown.stdout
    assert note.read_bytes() != before  # the preview changed nothing

    undo = kms("session", "undo", sid, "--yes", "--json")
    assert undo.returncode == 0, undo.stderr
    done = json.loads(undo.stdout)
    assert sorted(r["action"] for r in done["restored"]) == ["restore", "trash"] and not done["notRestored"], done
    assert note.read_bytes() == before  # byte for byte
    assert not created.exists()
    assert (vault_dir / ".trash" / "inbox" / "Agent scratch.md").read_text() == (
        "# Agent scratch\n\nwritten with the Write tool\n"
    )
