"""kms_recall through the real MCP server and client: the bundle's contract (best sections, graph
neighbours, why and how to read on, the budget), scope and privacy, and meaning with the real model."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
from support.mcp_session import mcp_client
from support.recall_vault import build
from support.vaults import note_id

from server.index.note_data import unfence

TOPIC = "login token refresh failing"


def _tokens(item: dict) -> int:
    """What the item really takes (bytes of its compact JSON / 4, rounded up)."""
    return -(-len(json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode()) // 4)


async def _recall(client, args: dict) -> dict:
    result = await client.call_tool("kms_recall", args)
    assert not result.is_error, result.structured_content
    return result.structured_content


def _check_budget(data: dict) -> None:
    total = sum(i["tokenEstimate"] for i in data["items"])
    assert total == data["usedTokens"] <= data["budgetTokens"]
    for item in data["items"]:
        assert _tokens(item) <= item["tokenEstimate"], item  # the estimate covers the item as sent
    keys = [(i["noteId"], i["heading"]) for i in data["items"]]
    assert len(keys) == len(set(keys))  # deduplicated


async def test_recall_bundles_best_sections_and_linked_notes(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    build(conn, tmp_path)
    async with mcp_client(db_path, vault="v", embed_enabled=False) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        annotations = tools["kms_recall"].annotations
        assert annotations is not None and annotations.read_only_hint is True
        data = await _recall(client, {"topic": TOPIC})
        _check_budget(data)
        assert data["budgetTokens"] == 4000 and data["mode"] == "keyword-only" and data["reason"]
        by_title = {i["title"]: i for i in data["items"]}
        auth = by_title["Auth service"]
        # the section that matches, not the whole note
        assert auth["kind"] == "match" and auth["heading"] == "Token refresh"
        assert "clock drifts" in auth["text"] and "helm" not in auth["text"]
        assert auth["readMore"] == {"noteId": auth["noteId"], "section": "Token refresh"}
        assert "search hit" in auth["why"] and "[[Incident 42]]" in auth["why"]
        # graph neighbours: a note it links to and a note linking to it, saying so
        runbook, team = by_title["Runbook"], by_title["Team notes"]
        assert runbook["kind"] == "linked" and "linked from [[Auth service]]" in runbook["why"]
        assert team["kind"] == "linked" and "links to [[Auth service]]" in team["why"]
        assert data["items"][0]["kind"] == "match"
        scores = [i["score"] for i in data["items"]]
        assert scores == sorted(scores, reverse=True)
        # readMore is what kms_read takes
        for item in data["items"]:
            read = await client.call_tool("kms_read", {k: v for k, v in item["readMore"].items() if v is not None})
            assert not read.is_error, read.structured_content
            assert (
                unfence(item["text"]).rstrip("…") in unfence(read.structured_content["body"])
                or item["kind"] == "linked"
            )
        # the vault argument a scoped session cannot widen
        other = await client.call_tool("kms_recall", {"topic": TOPIC, "vault": "other"})
        assert other.is_error and other.structured_content["error"] == "invalid-input"
    text = json.dumps(data)
    assert "zqx" not in text.lower() and "Secret login" not in text  # hidden, and the other vault


async def test_recall_never_exceeds_small_or_large_budgets(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    build(conn, tmp_path)
    big = "\n\n".join(
        f"Token refresh detail {i}: the login token refresh path, clock drift case {i}." for i in range(400)
    )
    (tmp_path / "v" / "Long log.md").write_text(f"# Long log\n\n## Refresh\n\n{big}\n")
    from server.index.indexer import index_vault
    from server.vault.registry import get_vault

    index_vault(conn, get_vault(conn, "v"))
    async with mcp_client(db_path, embed_enabled=False) as client:
        for budget in (200, 350, 1000, 4000, 20000):
            data = await _recall(client, {"topic": TOPIC, "budgetTokens": budget})
            _check_budget(data)
            assert data["items"], budget
            long = [i for i in data["items"] if i["title"] == "Long log"]
            if budget <= 4000:
                assert long and long[0]["truncated"] is True and unfence(long[0]["text"]).endswith("…")
        for bad in (
            {"topic": TOPIC, "budgetTokens": 20001},
            {"topic": TOPIC, "budgetTokens": 199},
            {"topic": ""},
            {"topic": TOPIC, "extra": 1},
            {"budgetTokens": 4000},
        ):
            r = await client.call_tool("kms_recall", bad)
            assert r.is_error and r.structured_content["error"] == "invalid-input", bad


async def test_recall_reads_are_tracked_and_unscoped_sessions_see_every_vault(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    build(conn, tmp_path)
    async with mcp_client(db_path, embed_enabled=False) as client:
        data = await _recall(client, {"topic": "token refresh clock drift"})
        session = client.runner.config.session_id
    vaults = {i["vault"] for i in data["items"]}
    assert vaults == {"v", "other"}
    assert "Secret login" not in json.dumps(data) and "zqxcanary" not in json.dumps(data)
    read = {r[0] for r in conn.execute("SELECT note_id FROM note_reads WHERE session_id = ?", (session,))}
    whole = {i["noteId"] for i in data["items"] if i["kind"] != "linked" and not i["truncated"]}
    # a whole section is a read (issue 32); a cut one or a linked note's excerpt is not
    assert read == whole and note_id(conn, "Auth service") in read
    assert {i["noteId"] for i in data["items"] if i["kind"] == "linked"} - read, "a linked note's excerpt: no read"
    searched = [r[0] for r in conn.execute("SELECT query FROM session_searches WHERE session_id = ?", (session,))]
    assert searched == ["token refresh clock drift"]  # the topic is the session's search


async def test_recall_by_meaning_with_the_model(
    conn: apsw.Connection, db_path: Path, tmp_path: Path, embed_model_dir: Path
) -> None:
    from server.index.embed import embed_pending

    build(conn, tmp_path)
    embed_pending(conn, model_dir=embed_model_dir)
    async with mcp_client(db_path, vault="v", embed_model_dir=str(embed_model_dir)) as client:
        semantic = client.runner.services.semantic
        assert semantic is not None
        semantic.embedder.load()
        data = await _recall(client, {"topic": "why do people get signed out when their computer's time is wrong"})
    _check_budget(data)
    assert data["mode"] == "hybrid"
    matches = [i for i in data["items"] if i["kind"] == "match"]
    assert matches[0]["title"] in ("Auth service", "Incident 42")
    auth = next(i for i in matches if i["title"] == "Auth service")
    assert auth["heading"] == "Token refresh" and ("semantic" in auth["why"] or "both" in auth["why"])
    assert "zqx" not in json.dumps(data).lower()
