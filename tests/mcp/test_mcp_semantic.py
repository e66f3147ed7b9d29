"""kms_semantic_search through a real MCP client, with the real model (and without one)."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.mcp_session import mcp_client
from support.vaults import note_id


async def _ready_client(db_path: Path, model_dir: Path):
    cm = mcp_client(db_path, embed_model_dir=str(model_dir))
    client = await cm.__aenter__()
    semantic = client.runner.services.semantic
    assert semantic is not None
    semantic.embedder.load()  # the server loads it in the background; here, before the first call
    return cm, client, semantic


async def test_semantic_search_finds_paraphrases_and_says_how(
    indexed: apsw.Connection, db_path: Path, embed_model_dir: Path
) -> None:
    from server.index.embed import embed_pending

    embed_pending(indexed, model_dir=embed_model_dir)
    cm, client, semantic = await _ready_client(db_path, embed_model_dir)
    try:
        semantic.index.refresh(indexed)
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["kms_semantic_search"].annotations.read_only_hint is True
        r = await client.call_tool(
            "kms_semantic_search", {"query": "what went wrong when people could not sign in", "limit": 5}
        )
        data = r.structured_content
        assert not r.is_error and data["mode"] == "hybrid"
        titles = [h["title"] for h in data["hits"]]
        assert "Login outage 2026-10" in titles[:3]
        assert {h["matchType"] for h in data["hits"]} <= {"keyword", "semantic", "both"}
        assert all(h["score"] > 0 and h["excerpt"] for h in data["hits"])

        from server.index.notes import set_hidden

        private = note_id(indexed, "Therapy notes")  # private: true in its frontmatter: never embedded
        r = await client.call_tool("kms_semantic_search", {"query": "therapy session lighthouse exercise"})
        assert private not in [h["noteId"] for h in r.structured_content["hits"]]
        chunks_of = "SELECT count(*) FROM chunks c JOIN notes n ON n.rid = c.rid WHERE n.id = ?"
        assert indexed.execute(chunks_of, (private,)).fetchall() == [(0,)]

        outage = note_id(indexed, "Login outage 2026-10")
        assert indexed.execute(chunks_of, (outage,)).fetchall() != [(0,)]
        set_hidden(indexed, "Login outage 2026-10", True)  # a newly hidden note's vectors are deleted
        assert indexed.execute(chunks_of, (outage,)).fetchall() == [(0,)]
        semantic.index.refresh(indexed)
        r = await client.call_tool("kms_semantic_search", {"query": "what went wrong when people could not sign in"})
        assert outage not in [h["noteId"] for h in r.structured_content["hits"]]
        bad = await client.call_tool("kms_semantic_search", {"query": "x", "limit": 51})
        assert bad.is_error and bad.structured_content["error"] == "invalid-input"
    finally:
        await cm.__aexit__(None, None, None)


async def test_semantic_search_falls_back_to_keywords_when_model_is_broken(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken-model"
    broken.mkdir()
    for name in ("model.onnx", "tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json"):
        (broken / name).write_text("not a model")
    cm, client, semantic = await _ready_client(db_path, broken)
    try:
        assert semantic.embedder.state == "failed"
        r = await client.call_tool("kms_semantic_search", {"query": "kubernetes deploy"})
        data = r.structured_content
        assert not r.is_error and data["mode"] == "keyword-only" and data["reason"]
        assert data["hits"] and data["hits"][0]["matchType"] == "keyword"
    finally:
        await cm.__aexit__(None, None, None)


async def test_without_a_model_nothing_is_downloaded_and_the_answer_says_how_to_get_it(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, monkeypatch
) -> None:
    """No network unless asked: ``embed.download`` is off by default, so a server that finds no model
    answers keyword-only at once, naming the ways to get one, and never tries the model hub."""
    monkeypatch.delenv("KMS_EMBED_DOWNLOAD", raising=False)  # the default, not the test suite's setting
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(tmp_path / "empty-cache"))
    async with mcp_client(db_path) as client:
        semantic = client.runner.services.semantic
        assert semantic is not None
        assert client.runner.config.embed_download is False
        assert semantic.embedder.load() is False and semantic.embedder.state == "missing"
        r = await client.call_tool("kms_semantic_search", {"query": "kubernetes deploy"})
        data = r.structured_content
        assert not r.is_error and data["mode"] == "keyword-only" and data["hits"]
        assert "kms model download" in data["reason"] and "embed.download" in data["reason"]
        assert "download failed" not in data["reason"], "no download may have been tried"
    assert not (tmp_path / "empty-cache").exists()
