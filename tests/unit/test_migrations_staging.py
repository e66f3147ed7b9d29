"""m044 (a detached call keeps its session and its decider) and m045 (writes landed for review after), from a
database m043 left with a staged call in it."""

from __future__ import annotations

from pathlib import Path

from server.activity import approvals, landed
from server.store.db import connect
from server.store.migrations import applied, migrate


def test_upgrade_keeps_a_staged_call_and_adds_the_new_tables(tmp_path: Path) -> None:
    path = tmp_path / "m043.db"
    conn = connect(path, migrate_schema=False)
    migrate(conn, upto="m043_composed_name_keys")
    assert "m044_detached_staging" not in applied(conn)
    conn.execute(
        "INSERT INTO pending_writes (created_at, expires_at, session_id, tool, input_summary, input_json,"
        " files_json, lines) VALUES (1, 2, 's1', 'kms_append', 'noteId=x', '{}', '[]', 0)"
    )
    conn.close()

    conn = connect(path)
    assert {"m044_detached_staging", "m045_landed_for_review"} <= set(applied(conn))
    old = approvals.get(conn, 1)
    assert old is not None and not old.detached and old.session is None and old.decider is None
    assert landed.listed(conn) == []
    conn.close()
