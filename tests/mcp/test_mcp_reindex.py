"""kms_reindex through a real MCP client: the agent asks for the index to catch up, is told what changed
(counts, never names), and is rate-limited per vault."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.mcp_session import mcp_client
from support.vaults import write


async def test_reindex_reports_what_changed_and_is_rate_limited(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    from server.index.notes import set_hidden

    set_hidden(indexed, "Home.md", True)  # a hidden note changed outside kms: counted, never named
    write(vault_dir / "Home.md", (vault_dir / "Home.md").read_text() + "\nsecret words\n")
    write(vault_dir / "Brand new.md", "# Brand new\n\nzyxquux\n")
    victim = next(p for p in sorted(vault_dir.rglob("*.md")) if p.name not in ("Home.md", "Brand new.md"))
    victim.unlink()
    async with mcp_client(db_path) as client:  # the read tier: no write switch needed
        before = await client.call_tool("kms_search", {"query": "zyxquux"})
        done = await client.call_tool("kms_reindex", {})
        again = await client.call_tool("kms_reindex", {})
        after = await client.call_tool("kms_search", {"query": "zyxquux"})
    assert not before.structured_content["hits"]
    assert not done.is_error, done.structured_content
    report = done.structured_content
    [v] = report["vaults"]
    assert (v["vault"], v["added"], v["updated"], v["removed"]) == ("sample", 1, 1, 1) and report["changed"] == 3
    assert "Home" not in str(report) and "secret" not in str(report)
    assert again.is_error and again.structured_content["error"] == "rate-limited"
    assert again.structured_content["retryAfterMs"] > 0
    assert [h["title"] for h in after.structured_content["hits"]] == ["Brand new"]
    indexed.execute("UPDATE meta SET value = '0' WHERE key LIKE 'agent_reindex_at:%'")  # the minute has passed
    async with mcp_client(db_path) as client:
        later = await client.call_tool("kms_reindex", {"vault": "sample"})
    assert not later.is_error and later.structured_content["changed"] == 0
