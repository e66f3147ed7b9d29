"""Servers renaming a note over and over are killed (SIGKILL) at unplanned moments while another one
appends to the notes that link to it: whatever moment each death falls on, every append is kept,
every link names the note as it is now, no journal is left, and the index is what a fresh index of
the files gives. Real processes, a real vault and database; the kill times vary from run to run, the
invariants do not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest
from support.organize import assert_index_is_fresh, index
from support.sql import value

pytestmark = pytest.mark.e2e

LINKERS = 80
WORKER = """
import os, sys
from server.config.session_contract import SessionConfig
from server.mcp.tools.dispatch import ToolRunner
from server.store.db import connect

db, kind, n, linkers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
config = SessionConfig.from_env({"KMS_DB_PATH": db}, write_enabled=True, edit_enabled=True, organize_enabled=True,
                                watch=False, per_minute=10000, per_session=1000000, max_files_per_call=1000,
                                session_id=f"stress-{kind}")
runner, conn = ToolRunner(config), connect(db)
failed = []
for i in range(n):
    if kind == "rename":
        sql = "SELECT id, title FROM notes WHERE path IN ('Target.md', 'Goal.md')"
        note_id, title = conn.execute(sql).fetchall()[0]
        out, err = runner.call("kms_rename", {"noteId": note_id, "title": "Goal" if title == "Target" else "Target",
                                              "keepAlias": False})
    else:
        note_id = conn.execute("SELECT id FROM notes WHERE path = ?", (f"L{i % linkers:02d}.md",)).fetchall()[0][0]
        out, err = runner.call("kms_append", {"noteId": note_id, "content": f"- append {i}"})
    if err:
        failed.append(out)
print("failed", failed)
sys.exit(1 if failed else 0)
"""


def _start(db_path: Path, kind: str, n: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [sys.executable, "-c", WORKER, str(db_path), kind, str(n), str(LINKERS)]
    return subprocess.Popen(args, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.mark.timeout(240)
def test_killed_renames_never_lose_an_append_nor_leave_a_link_half_renamed(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    root = tmp_path / "v"
    root.mkdir()
    (root / "Target.md").write_text("# Target\n", encoding="utf-8")
    for i in range(LINKERS):
        (root / f"L{i:02d}.md").write_text(f"# L{i}\n\nsee [[Target]]\n", encoding="utf-8")
    index(conn, root)
    appends = 0
    for round_ in range(6):
        before = value(conn, "SELECT count(*) FROM tool_invocations WHERE tool = 'kms_rename'")
        renamer, appender = _start(db_path, "rename", 100_000), _start(db_path, "append", 40)
        # renames under way (a loaded machine took longer than a fixed 0.7 s just to start the worker and
        # none ran before the kill), then a different moment of a unit each round
        deadline = time.monotonic() + 90
        while value(conn, "SELECT count(*) FROM tool_invocations WHERE tool = 'kms_rename'") == before:
            assert renamer.poll() is None and time.monotonic() < deadline, "the renamer never renamed"
            time.sleep(0.02)
        time.sleep(0.05 + 0.13 * round_)
        renamer.send_signal(signal.SIGKILL)
        renamer.wait(30)
        out, _ = appender.communicate(timeout=120)
        assert appender.returncode == 0, out
        appends += 40
    # the next write call finishes what the last killed renamer left (the appender may have ended before it)
    last = _start(db_path, "append", 1)
    out, _ = last.communicate(timeout=120)
    assert last.returncode == 0, out
    appends += 1
    (title,) = {p.stem for p in root.glob("*.md") if not p.stem.startswith("L")}
    texts = [(root / f"L{i:02d}.md").read_text(encoding="utf-8") for i in range(LINKERS)]
    assert sum(t.count("- append") for t in texts) == appends
    assert all(f"[[{title}]]" in t and t.count("[[") == 1 for t in texts), title
    renamed = value(conn, "SELECT count(*) FROM tool_invocations WHERE tool = 'kms_rename'")
    assert renamed > 0  # the renames really ran
    left = list((db_path.parent / "locks" / "units").iterdir())
    assert not left  # (a unit undone whole leaves none; one a writer had written over in between was kept)
    assert_index_is_fresh(conn, root, tmp_path)
