"""kms_capture through the real server and client (issue 26): the session's decisions, findings, next steps
and links fill its session note through the guard (one agent row, revertible); kms_start shows the open next
steps to the project's next session; the Stop rule asks a session that changed notes and captured nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
from support.mcp_session import mcp_client

from server.activity import provenance
from server.config.session_contract import SessionConfig
from server.writes.hook_events import ask_to_capture


async def call(client: Any, name: str, args: dict) -> tuple[dict, bool]:
    result = await client.call_tool(name, args)
    return result.structured_content, bool(result.is_error)


async def test_capture_fills_the_session_note_and_the_next_session_sees_its_next_steps(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    async with mcp_client(db_path, write_enabled=True, project="/code/app", session_id="s1") as client:
        await call(client, "kms_start", {})  # the session's row, with its project
        await call(client, "kms_search", {"query": "auth error handling"})
        made, bad = await call(
            client,
            "kms_capture",
            {
                "decisions": ["Retry twice, then fail loudly"],
                "nextSteps": ["Write the retry test"],
                "links": ["Auth service error handling"],
            },
        )
        assert not bad, made
        empty, refused = await call(client, "kms_capture", {})
        assert refused and empty["error"] == "invalid-input"
        more, bad = await call(client, "kms_capture", {"findings": ["The `retry` flag is ignored"]})
        assert not bad and more["path"] == made["path"] and more["captured"] == 1
    text = (vault_dir / made["path"]).read_text()
    assert made["path"].startswith("kms-sessions/Session ") and text.startswith("---\ntype: session\nsession: s1\n")
    assert "## Decisions\n\n- Retry twice, then fail loudly\n" in text
    assert "## Findings\n\n- The `retry` flag is ignored\n" in text
    assert "## Next steps\n\n- [ ] Write the retry test\n" in text
    assert "- `auth error handling` (kms_search)" in text
    rows = sorted((r["id"], r["actor"], r["status"]) for r in provenance.list_invocations(indexed, limit=10))
    assert [r[1:] for r in rows] == [("agent", "success"), ("agent", "error"), ("agent", "success")]

    async with mcp_client(db_path, project="/code/app", session_id="s2") as client:
        start, bad = await call(client, "kms_start", {})
    assert not bad
    [last] = start["lastSessions"]
    assert last["path"] == made["path"] and last["nextSteps"] == ["Write the retry test"]


async def test_the_stop_rule_asks_once_a_session_that_changed_notes_without_capturing(
    indexed: apsw.Connection, db_path: Path
) -> None:
    async with mcp_client(db_path, write_enabled=True, session_id="s1") as client:
        _made, bad = await call(client, "kms_create", {"title": "Plan", "content": "x\n"})
        assert not bad
        config: SessionConfig = client.runner.config
    stop = {"hook_event_name": "Stop", "stop_hook_active": False}
    off = ask_to_capture(indexed, config, stop)
    assert off is None  # capture.ask_agent is 0 by default
    import dataclasses

    asking = dataclasses.replace(config, capture_ask=1)
    assert ask_to_capture(indexed, asking, {**stop, "stop_hook_active": True}) is None  # the host's own guard
    first = ask_to_capture(indexed, asking, stop)
    assert first is not None and first["decision"] == "block" and "kms_capture" in first["reason"]
    assert ask_to_capture(indexed, asking, stop) is None  # never twice
    assert ask_to_capture(indexed, dataclasses.replace(asking, capture_ask=2, session_id="s9"), stop) is None
