"""The write tools through the real MCP server with every call on a thread that did not import kms, the one
that did having exited (``support/fresh_thread_writes.py``, in a process of its own: a segfault there is
this test's failure). The in-process tests make every call from the test's threads, which live as long as
the run: a library keeping per-thread state (yaml-rs crashed once the thread that first used it was gone)
passed them all and killed ``kms mcp`` in a host that paused before writing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.host_harness import signal_death
from support.writes import make_env

WORKER = Path(__file__).resolve().parents[1] / "support" / "fresh_thread_writes.py"


def test_create_append_edit_move_trash_each_from_a_fresh_thread(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    env.note("drafts/Existing.md", "---\ntags: [a]\n---\n# Existing\n\nA note with frontmatter.\n")
    env.conn.close()
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", str(WORKER), "drafts"],
        env={
            **os.environ,
            "KMS_DB_PATH": str(env.db_path),
            "KMS_AGENT_WRITE_TOOLS_ENABLED": "1",
            "KMS_AGENT_EDIT_TOOLS_ENABLED": "1",
            "KMS_AGENT_ORGANIZE_TOOLS_ENABLED": "1",
            "PYTHONFAULTHANDLER": "1",
        },
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert not signal_death(proc.returncode), f"exit {proc.returncode}\n{proc.stderr}"
    assert proc.returncode == 0, proc.stderr
    calls = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [c["tool"] for c in calls] == [
        "kms_create",
        "kms_append",
        "kms_update_properties",
        "kms_insert_at",
        "kms_read",
        "kms_edit",
        "kms_move",
        "kms_trash",
    ]
    assert [c for c in calls if c["isError"]] == []
    trashed = [p for p in env.root.rglob("Fresh thread note.md") if ".trash" in p.parts]
    assert len(trashed) == 1 and not (env.root / "drafts" / "Fresh thread note.md").exists()
    text = trashed[0].read_text()
    assert "edited" in text and "appended from another thread" in text and "inserted" in text
    assert "status: draft" in text
