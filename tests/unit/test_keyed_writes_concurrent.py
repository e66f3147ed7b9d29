"""Keyed and plain appends to one note from several processes and threads at once: each lands once, none is
refused, no journal is left. Every keyed write makes a journal and every write call recovers dead ones, so a
journal being made must never be taken for a dead writer's (``unit_journal.UnitJournal.begin``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import apsw
from support.organize import index, make_vault

WORKER = """
import json, sys, threading
from server.config.session_contract import SessionConfig
from server.mcp.tools.dispatch import ToolRunner

db, proc = sys.argv[1], sys.argv[2]
runner = ToolRunner(SessionConfig.from_env({"KMS_DB_PATH": db}, write_enabled=True, watch=False, per_minute=10000,
                                           per_session=1000000, session_id="s" + proc))
refused = []

def work(t):
    for i in range(15):
        key = {"idempotencyKey": f"k{t}-{i}"} if (i + t) % 2 else {}
        answer, is_error = runner.call("kms_append", {"noteId": "Note.md", "content": f"line {proc}.{t}.{i}", **key})
        if is_error:
            refused.append(answer)

threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(refused))
"""


def test_keyed_and_plain_appends_from_many_writers_each_land_once(
    tmp_path: Path, conn: apsw.Connection, db_path: Path
) -> None:
    root = make_vault(tmp_path / "v", {"Note.md": "# Note\n\nstart\n"})
    index(conn, root)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db_path), str(p)], env=env, stdout=subprocess.PIPE, text=True
        )
        for p in range(3)
    ]
    outputs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs
    assert [o.strip() for o in outputs] == ["[]"] * 3, outputs  # none refused
    lines = [line for line in (root / "Note.md").read_text().splitlines() if line.startswith("line ")]
    assert sorted(lines) == sorted(f"line {p}.{t}.{i}" for p in range(3) for t in range(3) for i in range(15))
    units = db_path.parent / "locks" / "units"
    assert not units.exists() or list(units.iterdir()) == []  # (a recorded one goes before its process ends)
