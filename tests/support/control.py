"""The dashboard's control-room world for snapshots: ``seed_fixed`` plus a write staged for approval by
session A (through the real guard, with a frozen clock) and session B paused by the person."""

from __future__ import annotations

from pathlib import Path

from support.dashboard import SESSION_A, SESSION_B, Seeded, seed_fixed


def seed_control(root: Path) -> Seeded:
    from server.activity import control
    from server.mcp.tools import REGISTRY
    from server.store.db import connect
    from support.writes import write_service

    world = seed_fixed(root)
    conn = connect(world.db_path)
    try:
        scratch = conn.execute("SELECT id FROM notes WHERE path = 'drafts/Agent scratch.md'").fetchall()[0][0]
        writes = write_service(world.db_path, SESSION_A, approval="always", clock=lambda: world.now - 42)
        spec = next(s for s in REGISTRY if s.name == "kms_append")
        staged = writes.stage(
            spec,
            {
                "noteId": scratch,
                "heading": "Findings",
                "content": "- root cause: the token cache outlived its keys\n- fix: expire it",
            },
        )
        assert staged is not None
        control.set_state(conn, SESSION_B, "paused", reason="too many findings", now=world.now - 10)
    finally:
        conn.close()
    return Seeded(world.db_path, world.vault, world.now, {**world.ids, "pending": staged.id})
