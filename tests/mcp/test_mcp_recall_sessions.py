"""kms_recall with the notes kms writes of sessions (issue 26), through the real server and client: what
kms_capture recorded comes back first for the next session of the project (decisions with their session, date
and project, fenced as note data), then the other notes, then the session notes; ``kind`` keeps one; a hidden
session note never surfaces; kms_start lists the open next steps as the note says them now."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import apsw
from support.mcp_session import mcp_client
from support.recall_vault import build
from support.vaults import write

from server.index.note_data import is_fenced, unfence

TOPIC = "login token refresh failing"
ON: dict[str, Any] = {"vault": "v", "embed_enabled": False, "write_enabled": True}


async def call(client: Any, name: str, args: dict) -> dict:
    result = await client.call_tool(name, args)
    assert not result.is_error, result.structured_content
    return result.structured_content


async def test_the_next_session_recalls_past_decisions_first(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    build(conn, tmp_path)
    async with mcp_client(db_path, project="/code/other", session_id="s-other", **ON) as client:
        await call(client, "kms_start", {})
        await call(client, "kms_capture", {"decisions": ["Token refresh keeps 30-day refresh tokens"]})
    async with mcp_client(db_path, project="/code/app", session_id="s-app", **ON) as client:
        await call(client, "kms_start", {})
        await call(client, "kms_recall", {"topic": TOPIC})
        made = await call(
            client,
            "kms_capture",
            {
                "decisions": ["Login token refresh retries twice, then fails loudly", "Deploy on Tuesdays"],
                "nextSteps": ["Write the retry test"],
            },
        )
    note = (tmp_path / "v" / made["path"]).read_text()
    assert f"- `{TOPIC}` (kms_recall)" in note  # the recall was one of the session's searches
    # a session note the person keeps private: never recalled
    write(
        tmp_path / "v" / "kms-sessions" / "Session private.md",
        "---\ntype: session\nprivate: true\n---\n# Session private\n\n## Decisions\n\n- Zqxcanary login token "
        "refresh decision\n",
    )
    from server.index.indexer import index_vault
    from server.vault.registry import get_vault

    index_vault(conn, get_vault(conn, "v"))

    async with mcp_client(db_path, project="/code/app", session_id="s-next", **ON) as client:
        data = await call(client, "kms_recall", {"topic": TOPIC})
        only = await call(client, "kms_recall", {"topic": TOPIC, "kind": "decision"})
        sessions = await call(client, "kms_recall", {"topic": TOPIC, "kind": "session"})
        notes = await call(client, "kms_recall", {"topic": TOPIC, "kind": "note"})
        bad = await client.call_tool("kms_recall", {"topic": TOPIC, "kind": "decisions"})
        assert bad.is_error and bad.structured_content["error"] == "invalid-input"
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert "kind" in tools["kms_recall"].input_schema["properties"]

    kinds = [i["kind"] for i in data["items"]]
    # s-other's note touched the topic only through its decision: it is there as that decision
    # then the notes on the topic, and last the session note that only touched it
    assert kinds[:2] == ["decision", "decision"] and kinds[-1] == "session", kinds
    assert set(kinds[2:-1]) <= {"match", "section", "linked"} and kinds[2:-1]
    mine, theirs = data["items"][:2]
    assert is_fenced(mine["text"]) and unfence(mine["text"]) == "Login token refresh retries twice, then fails loudly"
    assert (mine["session"], mine["project"], mine["thisProject"]) == ("s-app", "/code/app", True)
    [(started,)] = conn.execute("SELECT started_at FROM sessions WHERE id = 's-app'").fetchall()
    assert isinstance(started, float) and mine["date"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    assert mine["path"] == made["path"] and mine["readMore"] == {"noteId": made["noteId"], "section": "Decisions"}
    assert unfence(theirs["text"]) == "Token refresh keeps 30-day refresh tokens"
    assert (theirs["session"], theirs["thisProject"]) == ("s-other", False)
    assert data["items"][-1]["session"] == "s-app" and data["items"][-1]["heading"].endswith("Searches")
    text = json.dumps(data)
    assert "Tuesdays" not in text and "zqx" not in text.lower()
    assert sum(i["tokenEstimate"] for i in data["items"]) == data["usedTokens"] <= data["budgetTokens"]

    assert [i["kind"] for i in only["items"]] == ["decision", "decision"]

    # kms_start: the project's last session with its open next steps, as the note says them now
    async with mcp_client(db_path, project="/code/app", session_id="s-later", **ON) as client:
        [last] = (await call(client, "kms_start", {}))["lastSessions"]
    assert last["noteId"] == made["noteId"] and last["nextSteps"] == ["Write the retry test"]
    path = tmp_path / "v" / made["path"]
    path.write_text(path.read_text().replace("- [ ] Write the retry test", "- [x] Write the retry test"))
    index_vault(conn, get_vault(conn, "v"))
    async with mcp_client(db_path, project="/code/app", session_id="s-last", **ON) as client:
        later = (await call(client, "kms_start", {}))["lastSessions"]
    assert [s["nextSteps"] for s in later if s["noteId"] == made["noteId"]] == [[]]  # ticked off: done
    assert [(i["kind"], i["session"]) for i in sessions["items"]] == [("session", "s-app"), ("session", "s-other")]
    assert notes["items"] == data["items"][2:-1]  # the same notes, between the decisions and the session
    remembered = [i for i in data["items"] if i["kind"] in ("decision", "session")]
    assert not {i["path"] for i in notes["items"]} & {i["path"] for i in remembered}
