"""The prompts (issue 27) through the real server and real SDK clients, in both protocol eras: listed by the
session's tiers, their vault data fetched at ``prompts/get`` under the tools' rules (scope, hidden notes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest
from mcp.shared.exceptions import MCPError
from support.vaults import write
from test_mcp_resources import MODES, clients, config

from server.activity import approvals
from server.index.indexer import index_vault
from server.index.notes import set_hidden
from server.vault.registry import add_vault


@pytest.fixture
def vaults(conn: apsw.Connection, tmp_path: Path) -> apsw.Connection:
    a, b = tmp_path / "vault-a", tmp_path / "vault-b"
    write(a / "Lighthouse.md", "# Lighthouse\n\n## Lamp\n\nThe lamp burns whale oil and is trimmed at dusk.\n")
    write(a / "drafts" / "Log.md", "# Log\n\nStarted.\n")
    write(a / "drafts" / "Private log.md", "# Private log\n\nStarted.\n")
    write(b / "Beta.md", "# Beta\n\nAnother vault.\n")
    for root, name in ((a, "a"), (b, "b")):
        index_vault(conn, add_vault(conn, root, name))
    return conn


def text_of(result: Any) -> str:
    [message] = result.messages
    assert message.role == "user" and message.content.type == "text"
    return str(message.content.text)


@pytest.mark.parametrize("mode", MODES)
async def test_prompts_are_listed_by_what_the_sessions_tiers_allow(
    vaults: apsw.Connection, db_path: Path, mode: str
) -> None:
    reader = config(db_path, "sprmread0001")
    writer = config(db_path, "sprmwrit0001", write_enabled=True, allowlist=("drafts",))
    async with clients(db_path, mode, reader, writer) as (read_client, write_client):
        assert [p.name for p in (await read_client.list_prompts()).prompts] == ["start", "recall", "review"]
        listed = {p.name: p for p in (await write_client.list_prompts()).prompts}
        assert list(listed) == ["start", "recall", "capture", "review"]
        recall_args = [(a.name, a.required) for a in listed["recall"].arguments]
        assert recall_args[0] == ("topic", True) and all(not required for _, required in recall_args[1:])
        with pytest.raises(MCPError) as refused:
            await read_client.get_prompt("capture")
        assert refused.value.data["error"] == "invalid-input"
        assert refused.value.data["message"].endswith("prompts: start, recall, review")  # no hint of the others
        capture = text_of(await write_client.get_prompt("capture"))
        assert "kms_remember" in capture and "drafts" in capture


@pytest.mark.parametrize("mode", MODES)
async def test_start_and_recall_bring_the_vaults_data_within_the_sessions_scope(
    vaults: apsw.Connection, db_path: Path, mode: str
) -> None:
    async with clients(
        db_path, mode, config(db_path, "sprmscop0001", vault="a"), config(db_path, "sprmscop0002", vault="b")
    ) as (in_a, in_b):
        start = text_of(await in_a.get_prompt("start"))
        assert '"vaultScope": "a"' in start and "Lighthouse" in start and "Beta" not in start
        recall = text_of(await in_a.get_prompt("recall", {"topic": "lamp whale oil"}))
        assert "trimmed at dusk" in recall and "Lamp" in recall
        assert "trimmed at dusk" not in text_of(await in_b.get_prompt("recall", {"topic": "lamp whale oil"}))
        with pytest.raises(MCPError) as refused:
            await in_a.get_prompt("recall", {})
        assert refused.value.data["error"] == "invalid-input"
        # as Claude Code sends `/mcp__kms__recall "lamp whale oil"`: a word an argument, the quotes kept
        split = {"topic": '"lamp', "word2": "whale", "word3": 'oil"'}
        recall = text_of(await in_a.get_prompt("recall", split))
        assert "about 'lamp whale oil'" in recall and "trimmed at dusk" in recall


@pytest.mark.parametrize("mode", MODES)
async def test_review_shows_waiting_calls_and_agent_changes_on_visible_notes_of_the_sessions_vaults(
    vaults: apsw.Connection, db_path: Path, mode: str
) -> None:
    writer = config(db_path, "sprmrevw0001", write_enabled=True, allowlist=("drafts",))
    async with clients(db_path, mode, writer, config(db_path, "sprmrevw0002", vault="b")) as (agent, other):
        for note in ("drafts/Log.md", "drafts/Private log.md"):
            done = await agent.call_tool("kms_append", {"noteId": f"a:{note}", "content": "Lamp trimmed."})
            assert not done.is_error, done.structured_content
        set_hidden(vaults, "Private log", True)
        waiting = approvals.stage(
            vaults,
            session_id="sprmrevw0001",
            tool="kms_create",
            arguments={},
            input_summary="create drafts/Plan.md",
            lines=3,
            timeout_s=600,
            files=[{"vault": "a", "path": "drafts/Plan.md", "added": 3, "removed": 0}],
        )
        approvals.stage(
            vaults,
            session_id="sprmrevw0001",
            tool="kms_append",
            arguments={},
            input_summary="append to a hidden note",
            lines=1,
            timeout_s=600,
            files=[{"vault": "a", "path": "drafts/Private log.md", "hidden": True}],
        )
        review = text_of(await agent.get_prompt("review"))
        assert "drafts/Log.md" in review and f'"id": {waiting}' in review and "create drafts/Plan.md" in review
        assert "Private log" not in review and "hidden note" not in review
        elsewhere = text_of(await other.get_prompt("review"))
        assert "drafts/" not in elsewhere and "Nothing waits for approval" in elsewhere
